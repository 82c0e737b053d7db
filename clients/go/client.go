package ratelimit

import (
	"context"
	"errors"
	"strings"
)

// Client is what the limiter needs of a Redis connection. The goredis
// package adapts go-redis v9 (standalone, Cluster, Sentinel failover), the
// valkey package valkey-go; each opens connections of its own, with no
// retry of a sent command, so a timed-out call can still be read.
type Client interface {
	// Do sends one command to the primary that serves key's hash slot
	// (following a slot that moved) and returns its reply: int64, string,
	// []any or nil. A Redis error reply is a ReplyError; any other error
	// means Redis could not answer. args need not contain key: a command
	// without keys (COMMAND INFO, FUNCTION LOAD) goes where key lives.
	// The call waits as long as ctx allows.
	Do(ctx context.Context, key string, args ...string) (any, error)
	// DoLate is Do for a command that takes units or a lease (a check):
	// when ctx ends before its reply, DoLate returns, and the reply, which
	// Redis still sends once it runs the command, is read all the same (for
	// up to 60 s, then the connection is closed): late gets it, on a
	// goroutine of the client's, so what the command took is given back
	// (docs/clients.md "Failures"). late is not called for an error reply.
	DoLate(ctx context.Context, key string, late func(reply any), args ...string) (any, error)
	// Node names the node that serves key now ("" when the client cannot
	// tell: then one decision covers every node) and a number that changes
	// whenever a connection to it was opened again, after which the limiter
	// decides its mode there again (the server may have restarted without
	// the module, or lost the script).
	Node(key string) (node string, generation uint64)
	// Cluster reports whether keys of different hash tags may live on
	// different nodes (so each tag gets a call of its own).
	Cluster() bool
	// Close closes the connections, and returns once no late function runs.
	Close() error
}

// ReplyError is an error reply from Redis (ERR ..., WRONGTYPE ..., NOSCRIPT ...).
type ReplyError string

func (e ReplyError) Error() string { return string(e) }

// Code is the reply's first word: ERR, WRONGTYPE, NOSCRIPT, ...
func (e ReplyError) Code() string {
	code, _, _ := strings.Cut(string(e), " ")
	return code
}

// ErrUnavailable is what Check returns (wrapped, with the cause) when Redis
// could not answer and a limit of the request says Closed. Test with errors.Is.
var ErrUnavailable = errors.New("rate limiter unavailable")

// ErrClosed is returned by calls on a closed Limiter.
var ErrClosed = errors.New("rate limiter closed")

// ModeError is an error reply explained: the call cannot work as the server
// is set up (the module missing, an ACL without EVALSHA, a key in the other
// mode's layout). A server error like any error reply.
type ModeError struct {
	Message string
	Err     error // the reply it explains
}

func (e *ModeError) Error() string { return e.Message }
func (e *ModeError) Unwrap() error { return e.Err }

// notNow: error replies that mean "not now" rather than "wrong call". READONLY
// is a primary turned replica by a failover: the command did not run there.
var notNow = map[string]bool{"LOADING": true, "BUSY": true, "TRYAGAIN": true, "CLUSTERDOWN": true,
	"MASTERDOWN": true, "MOVED": true, "ASK": true, "READONLY": true}

// replyCode is the code of an error reply, "" for other errors.
func replyCode(err error) string {
	if err == nil {
		return ""
	}
	var reply ReplyError
	if errors.As(err, &reply) {
		return reply.Code()
	}
	return ""
}

// isAnswer tells an error Redis answered with (a server error: never a
// reason to let traffic through) from Redis not answering.
func isAnswer(err error) bool {
	var mode *ModeError
	if errors.As(err, &mode) {
		return true
	}
	code := replyCode(err)
	return code != "" && !notNow[code]
}
