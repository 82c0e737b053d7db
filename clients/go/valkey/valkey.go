// Package valkey lets a ratelimit.Limiter talk to Redis or Valkey through
// valkey-go (the Valkey project's client, rueidis's API): one server,
// Sentinel or a cluster, as valkey.NewClient picks them from the options.
package valkey

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	valkeygo "github.com/valkey-io/valkey-go"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/late"
)

// Client is a ratelimit.Client over a valkey-go client of its own, made
// from the app's options with no retry of a sent command, replies awaited
// up to 60 s (ConnWriteTimeout), and each call on a connection of valkey-go's
// pool rather than pipelined with others (DisableAutoPipelining): valkey-go
// drops the reply of a pipelined call its caller gave up on, and closes a
// pool connection whose read hit its deadline, which then still reads a
// timed-out check's reply (internal/late).
type Client struct {
	client  valkeygo.Client
	cluster bool
	lates   late.Conns

	mu    sync.Mutex
	dials uint64
}

// New makes a Client from opt, the options the app gives valkey.NewClient.
func New(opt valkeygo.ClientOption) (*Client, error) {
	c := &Client{}
	opt.DisableRetry = true
	opt.DisableCache = true
	opt.DisableAutoPipelining = true
	if opt.ConnWriteTimeout < late.Wait {
		opt.ConnWriteTimeout = late.Wait
	}
	dial := opt.DialFn
	if dial == nil {
		dial = func(addr string, dialer *net.Dialer, config *tls.Config) (net.Conn, error) {
			if config != nil {
				return tls.DialWithDialer(dialer, "tcp", addr, config)
			}
			return dialer.Dial("tcp", addr)
		}
	}
	opt.DialFn = func(addr string, dialer *net.Dialer, config *tls.Config) (net.Conn, error) {
		conn, err := dial(addr, dialer, config)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.dials++
		c.mu.Unlock()
		return c.lates.Wrap(conn), nil
	}
	client, err := valkeygo.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("valkey: %w", err)
	}
	c.client = client
	c.cluster = fmt.Sprintf("%T", client) == "*valkey.clusterClient"
	return c, nil
}

// Do sends args to the node that serves key's slot (valkey-go follows MOVED).
func (c *Client) Do(ctx context.Context, key string, args ...string) (any, error) {
	command := c.client.B().Arbitrary(args...).Build().SetSlot(key)
	v, err := c.client.Do(ctx, command).ToAny()
	if valkeygo.IsValkeyNil(err) {
		return nil, nil
	}
	if reply, ok := valkeygo.IsValkeyErr(err); ok {
		return nil, replyError(reply)
	}
	if err != nil {
		return nil, err
	}
	return normalize(v), nil
}

// DoLate is Do for a check: a reply that comes after ctx's deadline goes to handle.
func (c *Client) DoLate(ctx context.Context, key string, handle func(any), args ...string) (any, error) {
	return c.lates.Do(args, handle, func() (any, error) { return c.Do(ctx, key, args...) })
}

// Node cannot name a cluster's node by key here: one decision covers all
// nodes, made again after any new connection.
func (c *Client) Node(string) (string, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return "", c.dials
}

// Cluster reports whether valkey-go made a cluster client.
func (c *Client) Cluster() bool { return c.cluster }

// Close closes the connections, and returns once no late reply is awaited.
func (c *Client) Close() error {
	c.lates.Stop()
	c.client.Close()
	c.lates.Wait()
	return nil
}

// normalize: RESP3 answers (a boolean, an error inside an array) as the limiter reads RESP2's.
func normalize(v any) any {
	switch t := v.(type) {
	case []any:
		for i := range t {
			t[i] = normalize(t[i])
		}
		return v // as it came: no copy of the slice
	case bool:
		if t {
			return int64(1)
		}
		return nil
	case error:
		var reply *valkeygo.ValkeyError
		if errors.As(t, &reply) {
			return replyError(reply)
		}
	}
	return v
}

// replyError is the error reply as Redis sent it: valkey-go drops the ERR
// code of an "ERR ..." reply; other codes (NOSCRIPT, WRONGTYPE) it keeps.
func replyError(reply *valkeygo.ValkeyError) ratelimit.ReplyError {
	text := reply.Error()
	code, _, _ := strings.Cut(text, " ")
	if code == "" || strings.TrimFunc(code, func(r rune) bool { return r >= 'A' && r <= 'Z' }) != "" {
		text = "ERR " + text
	}
	return ratelimit.ReplyError(text)
}
