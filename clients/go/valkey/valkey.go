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
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// lateWait is how long a reply is awaited on a connection before it is
// closed: the limiter still reads a timed-out check's reply that long.
const lateWait = 60 * time.Second

// Client is a ratelimit.Client over a valkey-go client of its own, made
// from the app's options with no retry of a sent command and replies
// awaited up to 60 s (ConnWriteTimeout) so a timed-out check can be undone.
type Client struct {
	client  valkeygo.Client
	cluster bool

	mu    sync.Mutex
	dials uint64
}

// New makes a Client from opt, the options the app gives valkey.NewClient.
func New(opt valkeygo.ClientOption) (*Client, error) {
	c := &Client{}
	opt.DisableRetry = true
	opt.DisableCache = true
	if opt.ConnWriteTimeout < lateWait {
		opt.ConnWriteTimeout = lateWait
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
		if err == nil {
			c.mu.Lock()
			c.dials++
			c.mu.Unlock()
		}
		return conn, err
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

// Node cannot name a cluster's node by key here: one decision covers all
// nodes, made again after any new connection.
func (c *Client) Node(string) (string, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return "", c.dials
}

// Cluster reports whether valkey-go made a cluster client.
func (c *Client) Cluster() bool { return c.cluster }

// Close closes the connections.
func (c *Client) Close() error {
	c.client.Close()
	return nil
}

// normalize: RESP3 answers (a boolean, an error inside an array) as the limiter reads RESP2's.
func normalize(v any) any {
	switch v := v.(type) {
	case []any:
		for i := range v {
			v[i] = normalize(v[i])
		}
		return v
	case bool:
		if v {
			return int64(1)
		}
		return nil
	case error:
		var reply *valkeygo.ValkeyError
		if errors.As(v, &reply) {
			return replyError(reply)
		}
		return v
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
