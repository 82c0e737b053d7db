package ratelimit_test

import (
	"bytes"
	"context"
	"fmt"
	"go/format"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// goBlocks are the README's Go code blocks, in order.
func goBlocks(t *testing.T) []string {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	for _, part := range strings.Split(string(readme), "```go\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		if !ok {
			t.Fatal("a Go block without its end")
		}
		blocks = append(blocks, block)
	}
	return blocks
}

// expectedOutput is what a block's "// Output:" comment says it prints.
func expectedOutput(block string) string {
	_, comment, ok := strings.Cut(block, "// Output:")
	if !ok {
		return ""
	}
	var lines []string
	for i, line := range strings.Split(comment, "\n") {
		line = strings.TrimSpace(line)
		if i == 0 {
			if line != "" {
				lines = append(lines, line)
			}
			continue
		}
		if !strings.HasPrefix(line, "//") {
			break
		}
		lines = append(lines, strings.TrimSpace(strings.TrimPrefix(line, "//")))
	}
	return strings.Join(lines, "\n") + "\n"
}

// Every Go block of the README is gofmt-clean; the first is examples/http
// as it is; each other one is a program, compiled and run against its own
// Redis with the module, printing what its Output comment says.
func TestReadmeBlocks(t *testing.T) {
	blocks := goBlocks(t)
	if len(blocks) < 5 {
		t.Fatalf("%d Go blocks", len(blocks))
	}
	example, err := os.ReadFile(filepath.Join("examples", "http", "main.go"))
	if err != nil || blocks[0] != string(example) {
		t.Fatal("the README's net/http block is not examples/http/main.go")
	}
	dir, err := os.MkdirTemp(".", ".readme-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for i, block := range blocks {
		if formatted, err := format.Source([]byte(block)); err != nil || string(formatted) != block {
			t.Fatalf("block %d is not gofmt-clean: %v", i, err)
		}
		if i == 0 {
			continue
		}
		t.Run(fmt.Sprintf("block%d", i), func(t *testing.T) {
			want := expectedOutput(block)
			if !strings.HasPrefix(block, "package main\n") || want == "\n" {
				t.Fatal("not a program with an Output comment")
			}
			redis := servers.Start(t, servers.Options{})
			program := filepath.Join(dir, strconv.Itoa(i))
			os.MkdirAll(program, 0o755)
			source := strings.ReplaceAll(block, "127.0.0.1:6379", redis.Addr())
			if err := os.WriteFile(filepath.Join(program, "main.go"), []byte(source), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "go", "run", "./"+program)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			if stdout.String() != want {
				t.Fatalf("printed %q, want %q", stdout.String(), want)
			}
		})
	}
}

// go run ./examples/http serves GET / limited to 5 per IP per minute, /healthz unlimited.
func TestExampleServer(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	binary := filepath.Join(t.TempDir(), "example")
	if out, err := exec.Command("go", "build", "-o", binary, "./examples/http").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(listener.Addr().(*net.TCPAddr).Port)
	listener.Close()
	server := exec.Command(binary)
	server.Env = append(os.Environ(), "PORT="+port, "REDIS_URL=redis://"+redis.Addr())
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { server.Process.Kill(); server.Wait() }()
	url := "http://127.0.0.1:" + port
	for i := 0; ; i++ {
		if res, err := http.Get(url + "/healthz"); err == nil {
			res.Body.Close()
			break
		}
		if i == 200 {
			t.Fatal("the example did not start")
		}
		time.Sleep(25 * time.Millisecond)
	}
	for i := 1; i <= 6; i++ {
		res, err := http.Get(url + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		policy := res.Header.Get("RateLimit-Policy")
		if i <= 5 && (res.StatusCode != 200 || string(body) != "hello\n" || policy != `"per-ip";q=5;w=60` || !strings.HasPrefix(res.Header.Get("RateLimit"), `"per-ip";r=`+strconv.Itoa(5-i)+";t=")) {
			t.Fatalf("request %d: %d %q %v", i, res.StatusCode, body, res.Header)
		}
		if i == 6 && (res.StatusCode != 429 || res.Header.Get("Retry-After") == "" || !strings.HasPrefix(string(body), `{"error":"rate_limit_exceeded"`)) {
			t.Fatalf("request 6: %d %q %v", res.StatusCode, body, res.Header)
		}
	}
	for i := 0; i < 3; i++ {
		if res, err := http.Get(url + "/healthz"); err != nil || res.StatusCode != 200 || res.Header.Get("RateLimit") != "" {
			t.Fatalf("healthz: %v %v", res, err)
		} else {
			res.Body.Close()
		}
	}
	if got := redis.Do("EXISTS", "ratelimit:{ip:127.0.0.1}:per-ip"); got != "1" {
		t.Fatal("not keyed by the client's address")
	}
}
