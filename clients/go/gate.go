package ratelimit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The HTTP behaviour every framework shares (docs/clients.md "Framework
// behaviour"), without a framework: a Gate decides a request and says what
// to answer (headers, a 429 or 503 and its JSON body), and is told when the
// handler is done (units given back as the options say, leases released).
// The net/http middleware is a few lines over it; so is any other
// framework's.

// DefaultMessage is the message of a 429 that can pass later.
const DefaultMessage = "Rate limit exceeded. Please try again later."

// NeverMessage is the message of a 429 that can never pass.
const NeverMessage = "This request costs more than the rate limit allows in total; it can never be admitted."

// UnavailableBody is the body of a 503 while Redis cannot answer and a limit is Closed.
var UnavailableBody = []byte(`{"error":"rate_limiter_unavailable"}`)

// JSONContentType is the content type of the 429 and 503 bodies.
const JSONContentType = "application/json; charset=utf-8"

// HTTPOptions are the HTTP behaviour's options. Zero fields take their defaults.
type HTTPOptions struct {
	// Headers picks the rate-limit fields: HeadersDraft10 when empty.
	Headers Headers
	// StatusCode of a denial: 429 when 0.
	StatusCode int
	// Message of a denial that can pass later: DefaultMessage when empty.
	Message string
	// SkipFailedRequests: responses with status >= 400 give their units back.
	SkipFailedRequests bool
	// SkipSuccessfulRequests: responses with status < 400 give their units back.
	SkipSuccessfulRequests bool
	// Throttle: an admitted request waits its leaky-bucket delay before it runs (pacing).
	Throttle bool
}

// Gate is the framework-free HTTP behaviour of a limiter.
type Gate[R any] struct {
	limiter *Limiter[R]
	opts    HTTPOptions
	denied  []byte // the 429 body up to its retry_after_seconds, made once
}

// NewGate checks opts and makes a gate over l.
func NewGate[R any](l *Limiter[R], opts HTTPOptions) (*Gate[R], error) {
	if l == nil {
		return nil, configError("limiter", "required")
	}
	var err error
	if opts.Headers, err = opts.Headers.check(); err != nil {
		return nil, err
	}
	switch {
	case opts.StatusCode == 0:
		opts.StatusCode = 429
	case opts.StatusCode < 400 || opts.StatusCode > 599:
		return nil, configError("statusCode", "must be an HTTP error status 400..599 (got %d)", opts.StatusCode)
	}
	if opts.Message == "" {
		opts.Message = DefaultMessage
	}
	return &Gate[R]{limiter: l, opts: opts, denied: deniedHead(opts.Message)}, nil
}

// Limiter is the gate's limiter.
func (g *Gate[R]) Limiter() *Limiter[R] { return g.limiter }

// Verdict is what to do with one request.
type Verdict struct {
	// Decision is nil when a limit is Closed and Redis cannot answer.
	Decision *Decision
	// Status is 0 to run the handler, else the status to answer with (429, 503).
	Status int
	// Fields go on the response, whatever the status.
	Fields []Field
	// Body is the JSON body to answer with when Status is not 0.
	Body []byte
	// Delay is how long to wait before running the handler (Throttle).
	Delay time.Duration
}

// Decide decides one request. The error is a server error (an error reply,
// a key function's error): answer 500.
func (g *Gate[R]) Decide(ctx context.Context, req R) (Verdict, error) {
	d, err := g.limiter.Check(ctx, req)
	if errors.Is(err, ErrUnavailable) {
		return Verdict{Status: 503, Body: UnavailableBody}, nil
	}
	if err != nil {
		return Verdict{}, err
	}
	var now time.Time // legacy's X-RateLimit-Reset alone reads the clock
	if g.opts.Headers == HeadersLegacy {
		now = time.Now()
	}
	v := Verdict{Decision: d, Fields: g.opts.Headers.Fields(d, now)}
	if !d.Allowed {
		v.Status, v.Body = g.opts.StatusCode, deniedBody(d, g.denied)
	} else if g.opts.Throttle {
		v.Delay = time.Duration(d.DelayMs) * time.Millisecond
	}
	return v, nil
}

// Done is called once the handler of an admitted request is done, with the
// response's status: the units come back when SkipFailedRequests or
// SkipSuccessfulRequests says so, and the decision's leases are released.
func (g *Gate[R]) Done(ctx context.Context, v Verdict, status int) {
	d := v.Decision
	if d == nil || !d.Allowed {
		return
	}
	failed := status >= 400
	if (failed && g.opts.SkipFailedRequests) || (!failed && g.opts.SkipSuccessfulRequests) {
		if err := g.limiter.Refund(context.WithoutCancel(ctx), d, nil); err != nil {
			g.limiter.logger.Warn(fmt.Sprintf("rate limiter refund failed: %v", err))
		}
	}
	g.limiter.Release(ctx, d)
}

// DeniedBody is the JSON body of a 429: message for a denial that can pass
// later (DefaultMessage when empty), NeverMessage for one that never can.
func DeniedBody(d *Decision, message string) []byte {
	if message == "" {
		message = DefaultMessage
	}
	return deniedBody(d, deniedHead(message))
}

// neverBody is the 429 body of a request that can never pass.
var neverBody = `{"error":"rate_limit_exceeded","message":` + strconv.Quote(NeverMessage) + `,"retry_after_seconds":null}`

// deniedHead is the 429 body with message up to its retry_after_seconds.
func deniedHead(message string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"error":"rate_limit_exceeded","message":`)
	encoder := json.NewEncoder(&b)
	encoder.SetEscapeHTML(false)
	_ = encoder.Encode(message) // a string always encodes
	b.Truncate(b.Len() - 1)     // its newline
	b.WriteString(`,"retry_after_seconds":`)
	return b.Bytes()
}

// deniedBody is d's 429 body after head (deniedHead's).
func deniedBody(d *Decision, head []byte) []byte {
	if d.NeverAllowed {
		return []byte(neverBody)
	}
	b := make([]byte, 0, len(head)+21)
	b = append(b, head...)
	b = strconv.AppendInt(b, seconds(d.RetryAfterMs), 10)
	return append(b, '}')
}
