package ratelimit

import (
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
	want := "#!lua name=" + functionName + "\nlocal RATELIMIT_FUNCTION = '" + functionName + "'\n" + luaSource
	if functionSource != want || len(functionName) != len("ratelimit_")+12 || functionName[10:] != luaSHA[:12] {
		t.Fatalf("function %s", functionName)
	}
}
