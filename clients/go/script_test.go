package ratelimit

import (
	"context"
	"strings"

	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
	"os"
	"path/filepath"
	"testing"
)

// The embedded copy is lua/ratelimit.lua as it is: `go generate` makes it.
func TestLuaCopyIsTheSource(t *testing.T) {
	source, err := os.ReadFile(filepath.Join("..", "..", "lua", "ratelimit.lua"))
	if err != nil {
		t.Fatalf("lua/ratelimit.lua: %v", err)
	}
	if string(source) != luaSource {
		t.Fatal("ratelimit.lua differs from lua/ratelimit.lua: run go generate in clients/go")
	}
}

// A module call as the script's arguments: numkeys, the keys, the command, the rest.
func TestScriptArgs(t *testing.T) {
	cases := map[string][2][]string{
		"multi":   {{"RL.MULTI", "2", "a", "b", "*", "TOKENBUCKET", "5", "1", "1", "FIXEDWINDOW", "3", "60", "1"}, {"2", "a", "b", "RL.MULTI", "*", "TOKENBUCKET", "5", "1", "1", "FIXEDWINDOW", "3", "60", "1"}},
		"refund":  {{"RL.REFUND", "k", "TOKENBUCKET", "5", "1", "*", "3"}, {"1", "k", "RL.REFUND", "TOKENBUCKET", "5", "1", "*", "3"}},
		"release": {{"RL.RELEASE", "k", "7", "*"}, {"1", "k", "RL.RELEASE", "7", "*"}},
	}
	for name, c := range cases {
		got := scriptArgs(c[0])
		if len(got) != len(c[1]) {
			t.Fatalf("%s: %q", name, got)
		}
		for i := range got {
			if got[i] != c[1][i] {
				t.Fatalf("%s: %q, want %q", name, got, c[1])
			}
		}
	}
}

// The function form: the header, the line naming the function, the file unchanged.
func TestFunctionSource(t *testing.T) {
	want := "#!lua name=" + LibraryName + "\nlocal RATELIMIT_FUNCTION = '" + LibraryName + "'\n" + luaSource
	if functionSource != want || len(LibraryName) != len("ratelimit_")+12 || LibraryName[10:] != luaSHA[:12] {
		t.Fatalf("function %s", LibraryName)
	}
}

// rawClient sends commands on a connection per call (servers.Server.Try); enough for one command's test.
type rawClient struct{ s *servers.Server }

func (c rawClient) Do(_ context.Context, _ string, args ...string) (any, error) {
	reply, err := c.s.Try(args...)
	if err != nil {
		return nil, ReplyError(err.Error())
	}
	return reply, nil
}
func (c rawClient) DoLate(ctx context.Context, key string, _ func(any), args ...string) (any, error) {
	return c.Do(ctx, key, args...)
}
func (c rawClient) Node(string) (string, uint64) { return "", 0 }
func (c rawClient) Cluster() bool                { return false }
func (c rawClient) Close() error                 { return nil }

// Loading a library another process loaded first is success.
func TestLoadFunctionAlreadyThere(t *testing.T) {
	server := servers.Start(t, servers.Options{NoModule: true})
	for i := 0; i < 2; i++ {
		if err := loadFunction(context.Background(), rawClient{server}, "k"); err != nil {
			t.Fatalf("load %d: %v", i, err)
		}
	}
	if _, err := server.Try("FUNCTION", "LOAD", functionSource); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("the server's words changed: %v", err)
	}
}
