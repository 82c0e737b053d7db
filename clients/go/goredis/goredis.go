// Package goredis lets a ratelimit.Limiter talk to Redis through go-redis v9:
// standalone (redis.NewClient), Redis Cluster (redis.NewClusterClient) and
// Sentinel failover (redis.NewFailoverClient).
package goredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/late"
)

// Client is a ratelimit.Client over connections of its own, opened with the
// app's client's options (address, credentials, TLS, Sentinel) changed where
// the limiter needs it: a sent command is never retried (it may have run),
// a dial is tried once (a refused connection fails at once), a call waits
// until its context's deadline (60 s without one), and a check's reply that
// comes after that is still read (internal/late).
type Client struct {
	single  *redis.Client
	cluster *redis.ClusterClient

	lates late.Conns

	mu     sync.Mutex
	dials  map[string]uint64        // connections opened per node address
	nodes  map[string]*redis.Client // a cluster's node clients by address
	closed bool
}

// New makes a Client with the options of rdb: a *redis.Client (also one
// from NewFailoverClient) or a *redis.ClusterClient. rdb itself is not
// used, and stays the app's to close.
func New(rdb redis.UniversalClient) (*Client, error) {
	c := &Client{dials: map[string]uint64{}, nodes: map[string]*redis.Client{}}
	switch rdb := rdb.(type) {
	case *redis.Client:
		opt := *rdb.Options()
		opt.Dialer = c.counting(opt.Dialer)
		limiterOptions(&opt.MaxRetries, &opt.DialerRetries, &opt.ReadTimeout, &opt.WriteTimeout, &opt.ContextTimeoutEnabled)
		opt.MaintNotificationsConfig = noNotifications
		c.single = redis.NewClient(&opt)
	case *redis.ClusterClient:
		opt := *rdb.Options()
		opt.Dialer = c.counting(opt.Dialer)
		limiterOptions(&opt.MaxRetries, &opt.DialerRetries, &opt.ReadTimeout, &opt.WriteTimeout, &opt.ContextTimeoutEnabled)
		opt.MaxRedirects = -1 // the limiter follows MOVED itself, once, and never resends after a network error
		opt.DisableRoutingPolicies = true
		opt.MaintNotificationsConfig = noNotifications
		newClient := opt.NewClient
		opt.NewClient = func(node *redis.Options) *redis.Client {
			var client *redis.Client
			if newClient != nil {
				client = newClient(node)
			} else {
				client = redis.NewClient(node)
			}
			c.mu.Lock()
			c.nodes[node.Addr] = client
			c.mu.Unlock()
			return client
		}
		c.cluster = redis.NewClusterClient(&opt)
	case nil:
		return nil, errors.New("goredis: New needs the app's client (redis.NewClient, NewClusterClient or NewFailoverClient)")
	default:
		return nil, fmt.Errorf("goredis: New takes a *redis.Client or *redis.ClusterClient (got %T)", rdb)
	}
	return c, nil
}

// noNotifications: the limiter's connections do not take part in a managed
// service's maintenance hand-offs (the app's own client does); sharing the
// app's configuration would register its handlers twice.
var noNotifications = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}

// limiterOptions: no retry of a sent command, one dial try, a reply awaited
// until the context's deadline, or late.Wait when it has none.
func limiterOptions(maxRetries, dialerRetries *int, readTimeout, writeTimeout *time.Duration, contextTimeout *bool) {
	*maxRetries = -1
	*dialerRetries = 1
	*readTimeout = late.Wait
	*writeTimeout = late.Wait
	*contextTimeout = true
}

// counting wraps a dialer so each connection opened is counted for the
// node it reached (the limiter decides its mode there again).
func (c *Client) counting(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 5 * time.Minute}
		dial = dialer.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.dials[addr]++
		c.dials[""]++
		c.mu.Unlock()
		return c.lates.Wrap(conn), nil
	}
}

// Do sends args to the primary that serves key's slot.
func (c *Client) Do(ctx context.Context, key string, args ...string) (any, error) {
	if c.single != nil {
		return reply(c.single.Do(ctx, anys(args)...).Result())
	}
	node, err := c.cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	result, err := reply(node.Do(ctx, anys(args)...).Result())
	var moved ratelimit.ReplyError
	if !errors.As(err, &moved) || (moved.Code() != "MOVED" && moved.Code() != "ASK") {
		return result, err
	}
	// The slot moved (resharding, a failover): the command did not run.
	// Ask the node named, once, and learn the new layout meanwhile.
	fields := strings.Fields(string(moved))
	c.cluster.ReloadState(ctx)
	if len(fields) != 3 {
		return nil, err
	}
	c.mu.Lock()
	target := c.nodes[fields[2]]
	c.mu.Unlock()
	if target == nil {
		return nil, err // a node the client does not know yet: unavailable for now
	}
	if moved.Code() == "MOVED" {
		return reply(target.Do(ctx, anys(args)...).Result())
	}
	pipe := target.Pipeline()
	pipe.Do(ctx, "ASKING")
	cmd := pipe.Do(ctx, anys(args)...)
	_, _ = pipe.Exec(ctx)
	return reply(cmd.Result())
}

// DoLate is Do for a check: a reply that comes after ctx's deadline goes to late.
func (c *Client) DoLate(ctx context.Context, key string, handle func(any), args ...string) (any, error) {
	return c.lates.Do(args, handle, func() (any, error) { return c.Do(ctx, key, args...) })
}

// Node is the address of the primary serving key (its dial count), or on one server the server's.
func (c *Client) Node(key string) (string, uint64) {
	node := ""
	if c.cluster != nil {
		if client, err := c.cluster.MasterForKey(context.Background(), key); err == nil {
			node = client.Options().Addr
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return node, c.dials[node]
}

// Cluster reports whether this is a Redis Cluster.
func (c *Client) Cluster() bool { return c.cluster != nil }

// Close closes the connections.
func (c *Client) Close() error {
	c.mu.Lock()
	closed := c.closed
	c.closed = true
	c.mu.Unlock()
	if closed {
		return nil
	}
	c.lates.Stop()
	var err error
	if c.single != nil {
		err = c.single.Close()
	} else {
		err = c.cluster.Close()
	}
	c.lates.Wait()
	return err
}

// anys is args as go-redis takes them: the command's name a string (go-redis
// reads it), the others pointers into args, which go-redis writes as the
// strings (a string put in an interface is a copy allocated each).
func anys(args []string) []any {
	out := make([]any, len(args))
	for i := range args {
		if i == 0 {
			out[i] = args[0]
		} else {
			out[i] = &args[i]
		}
	}
	return out
}

// reply turns go-redis's reply into the limiter's: int64, string, []any,
// nil; an error reply a ratelimit.ReplyError.
func reply(v any, err error) (any, error) {
	if err == nil {
		return late.Normalize(v), nil
	}
	if err == redis.Nil {
		return nil, nil
	}
	var redisErr redis.Error
	if errors.As(err, &redisErr) {
		return nil, ratelimit.ReplyError(redisErr.Error())
	}
	return nil, err
}
