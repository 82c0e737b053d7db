package local

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// moduleServer starts a redis-server with the module loaded, on a free
// port, for the test; it is stopped when the test ends. The module is
// $RATELIMIT_MODULE, else target/release/libredis_ratelimit.so at the
// repository's root (`cargo build --release` builds it).
func moduleServer(t *testing.T) *redis.Client {
	t.Helper()
	module := os.Getenv("RATELIMIT_MODULE")
	if module == "" {
		module = filepath.Join("..", "..", "..", "..", "target", "release", "libredis_ratelimit.so")
	}
	module, err := filepath.Abs(module)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(module); err != nil {
		t.Fatalf("the module is not built (cargo build --release at the repository's root): %v", err)
	}
	server := os.Getenv("REDIS_SERVER")
	if server == "" {
		server = "redis-server"
	}
	port := freePort(t)
	cmd := exec.Command(server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir(), "--loadmodule", module)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", server, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), DisableIdentity: true})
	t.Cleanup(func() { _ = client.Close() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(25 * time.Millisecond) {
		err := client.Ping(context.Background()).Err()
		if err == nil {
			return client
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server --loadmodule %s did not answer on port %d: %v", module, port, err)
		}
	}
}

// freePort is a port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	return listener.Addr().(*net.TCPAddr).Port
}
