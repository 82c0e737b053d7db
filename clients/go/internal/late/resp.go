package late

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// RESP as far as a late reply needs it (go-redis and valkey-go keep their
// parsers internal): the commands the library wrote, and one reply read,
// RESP2 or RESP3: int64, string, float64, bool, nil, []any, map[any]any; an
// error reply a ratelimit.ReplyError value.

// Bounds on what a late reply may be: a check's reply is a few numbers.
const (
	maxBulk  = 1 << 20
	maxItems = 1 << 16
	maxDepth = 8
)

var errProtocol = errors.New("goredis: not a RESP reply")

// commands splits what the library wrote (arrays of bulk strings) into its
// commands; false when it is not that.
func commands(written []byte) ([][]string, bool) {
	var out [][]string
	for len(written) > 0 {
		n, rest, ok := header(written, '*')
		if !ok || n < 0 || n > maxItems {
			return nil, false
		}
		command := make([]string, n)
		for i := range command {
			var size int
			if size, rest, ok = header(rest, '$'); !ok || size < 0 || len(rest) < size+2 || string(rest[size:size+2]) != "\r\n" {
				return nil, false
			}
			command[i], rest = string(rest[:size]), rest[size+2:]
		}
		out, written = append(out, command), rest
	}
	return out, len(out) > 0
}

// header reads "<kind><integer>\r\n" at the start of b.
func header(b []byte, kind byte) (int, []byte, bool) {
	end := bytes.Index(b, []byte("\r\n"))
	if end < 1 || b[0] != kind {
		return 0, nil, false
	}
	text := string(b[1:end])
	n, err := strconv.Atoi(text)
	return n, b[end+2:], err == nil && strconv.Itoa(n) == text
}

// readReply reads one reply; push messages and attributes before it are skipped.
func readReply(r *bufio.Reader) (any, error) { return readValue(r, 0) }

func readValue(r *bufio.Reader, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errProtocol
	}
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, errProtocol
	}
	kind, text := line[0], string(line[1:len(line)-2])
	switch kind {
	case '+':
		return text, nil
	case '-':
		return ratelimit.ReplyError(text), nil
	case ':':
		return strconv.ParseInt(text, 10, 64)
	case ',':
		return strconv.ParseFloat(text, 64)
	case '(':
		return text, nil // a big number, as text
	case '#':
		if text != "t" && text != "f" {
			return nil, errProtocol
		}
		return text == "t", nil
	case '_':
		return nil, nil
	case '$', '=', '!':
		data, err := readBulk(r, text)
		if err != nil || data == nil {
			return nil, err
		}
		switch kind {
		case '=': // verbatim: "txt:" before the text
			if len(data) < 4 {
				return nil, errProtocol
			}
			return string(data[4:]), nil
		case '!':
			return ratelimit.ReplyError(data), nil
		}
		return string(data), nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(text)
		if err != nil || n > maxItems {
			return nil, errProtocol
		}
		if n < 0 {
			return nil, nil
		}
		if kind == '%' || kind == '|' {
			n *= 2
		}
		items := make([]any, n)
		for i := range items {
			if items[i], err = readValue(r, depth+1); err != nil {
				return nil, err
			}
		}
		switch kind {
		case '>', '|': // a push message or an attribute: not the reply, which follows
			return readValue(r, depth)
		case '%':
			m := make(map[any]any, n/2)
			for i := 0; i < n; i += 2 {
				key := items[i]
				switch key.(type) {
				case []any, map[any]any: // not comparable: as text
					key = fmt.Sprint(key)
				}
				m[key] = items[i+1]
			}
			return m, nil
		}
		return items, nil
	}
	return nil, errProtocol
}

// readBulk reads a bulk string of the length text says; nil for length -1.
func readBulk(r *bufio.Reader, text string) ([]byte, error) {
	n, err := strconv.Atoi(text)
	if err != nil || n < -1 || n > maxBulk {
		return nil, errProtocol
	}
	if n == -1 {
		return nil, nil
	}
	data := make([]byte, n+2)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, err
	}
	if string(data[n:]) != "\r\n" {
		return nil, errProtocol
	}
	return data[:n], nil
}

// Normalize is a RESP3 reply as go-redis gives it (a map, a boolean) as the
// limiter reads RESP2's; an array is changed in place and v returned as it
// came (no copy).
func Normalize(v any) any {
	switch t := v.(type) {
	case []any:
		for i := range t {
			t[i] = Normalize(t[i])
		}
	case map[any]any:
		out := make([]any, 0, 2*len(t))
		for k, value := range t {
			out = append(out, Normalize(k), Normalize(value))
		}
		return out
	case bool:
		if t {
			return int64(1)
		}
		return nil
	}
	return v
}
