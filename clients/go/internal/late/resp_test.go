package late

import (
	"bufio"
	"fmt"
	"reflect"
	"strings"
	"testing"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// encode is a command as go-redis and valkey-go write it: an array of bulk strings.
func encode(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

func TestCommands(t *testing.T) {
	check := []string{"RL.MULTI", "1", "ratelimit:{ip:1}:per-ip", "*", "TOKENBUCKET", "10", "1", "1"}
	sent, ok := commands([]byte(encode("ASKING") + encode(check...)))
	if !ok || !reflect.DeepEqual(sent, [][]string{{"ASKING"}, check}) {
		t.Fatalf("%q %v", sent, ok)
	}
	for _, bad := range []string{"", "*1\r\n$3\r\nab\r\n", "*1\r\n", "+OK\r\n", "*1\r\n$-1\r\n", encode("PING") + "*"} {
		if sent, ok := commands([]byte(bad)); ok {
			t.Fatalf("%q: %q", bad, sent)
		}
	}
}

func TestReadReply(t *testing.T) {
	for _, c := range []struct {
		wire string
		want any
	}{
		{"*4\r\n:1\r\n:0\r\n*2\r\n:-5\r\n:7\r\n$-1\r\n", []any{int64(1), int64(0), []any{int64(-5), int64(7)}, nil}},
		{"+OK\r\n", "OK"},
		{"-ERR wrong\r\n", ratelimit.ReplyError("ERR wrong")},
		{"$5\r\nhello\r\n", "hello"},
		{"$0\r\n\r\n", ""},
		{"*-1\r\n", nil},
		{"_\r\n", nil},
		{"#t\r\n", true},
		{",1.5\r\n", 1.5},
		{"(12345678901234567890\r\n", "12345678901234567890"},
		{"=8\r\ntxt:some\r\n", "some"},
		{"!9\r\nERR other\r\n", ratelimit.ReplyError("ERR other")},
		{"%1\r\n+a\r\n:1\r\n", map[any]any{"a": int64(1)}},
		{"~1\r\n:2\r\n", []any{int64(2)}},
		{">2\r\n+message\r\n+x\r\n:3\r\n", int64(3)},          // a push message before the reply
		{"|1\r\n+ttl\r\n:9\r\n*1\r\n:4\r\n", []any{int64(4)}}, // an attribute before the reply
	} {
		got, err := readReply(bufio.NewReader(strings.NewReader(c.wire)))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Fatalf("%q: %#v %v (want %#v)", c.wire, got, err, c.want)
		}
	}
	for _, bad := range []string{"", ":x\r\n", "?1\r\n", "$3\r\nab", "$2\r\nabcd\r\n", "*2\r\n:1\r\n", "$99999999\r\n", "#x\r\n", "+OK\n",
		strings.Repeat("*1\r\n", maxDepth+2) + ":1\r\n"} {
		if got, err := readReply(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Fatalf("%q: %#v", bad, got)
		}
	}
}

// Whatever the bytes, the readers answer or fail: never a panic, never a huge allocation.
func FuzzReadReply(f *testing.F) {
	for _, seed := range []string{"*2\r\n:1\r\n*1\r\n$2\r\nab\r\n", "%1\r\n*1\r\n:1\r\n:2\r\n", ">1\r\n:1\r\n+OK\r\n", "=3\r\nabc\r\n", "!-1\r\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		_, _ = readReply(bufio.NewReader(strings.NewReader(string(wire))))
		if sent, ok := commands(wire); ok {
			var again strings.Builder
			for _, command := range sent {
				again.WriteString(encode(command...))
			}
			if again.String() != string(wire) {
				t.Fatalf("%q read as %q", wire, sent)
			}
		}
	})
}
