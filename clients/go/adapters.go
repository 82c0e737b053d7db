package ratelimit

import (
	"context"
	"log/slog"
	"net/http"
	"net/textproto"
	"strconv"
)

// What the framework adapters (packages gin, echo, fiber, grpc) need of the
// core beyond the Gate: the fields merged into what a response carries
// already, the decision on a context, and the limiter's logger.

// MergeField is the value field f takes on a response whose value for
// f.Name is current ("" when it has none): a RateLimit or RateLimit-Policy
// list an earlier limiter set grows by this one's members, Retry-After
// keeps the longer wait, any other field is replaced.
func MergeField(current string, f Field) string {
	switch {
	case current == "":
		return f.Value
	case f.Name == "RateLimit" || f.Name == "RateLimit-Policy":
		return current + ", " + f.Value
	case f.Name == "Retry-After":
		was, err := strconv.Atoi(current)
		if now, err2 := strconv.Atoi(f.Value); err == nil && err2 == nil && now > was {
			return f.Value
		}
		return current
	}
	return f.Value
}

// SetFields sets fields on h, each merged by MergeField.
func SetFields(h http.Header, fields []Field) {
	values := make([]string, len(fields)) // each field's one value, capped: an append elsewhere copies
	for i, f := range fields {
		key := canonicalKey(f.Name)
		current := ""
		if had := h[key]; len(had) > 0 {
			current = had[0]
		}
		values[i] = MergeField(current, f)
		h[key] = values[i : i+1 : i+1]
	}
}

// canonicalKey is name as http.Header keys it, the fields' own names made
// once: the draft's "RateLimit" is "Ratelimit" there, and h.Set would make
// that string anew on every request.
func canonicalKey(name string) string {
	switch name {
	case "RateLimit":
		return "Ratelimit"
	case "RateLimit-Policy":
		return "Ratelimit-Policy"
	case "Retry-After":
		return "Retry-After"
	case "RateLimit-Limit":
		return "Ratelimit-Limit"
	case "RateLimit-Remaining":
		return "Ratelimit-Remaining"
	case "RateLimit-Reset":
		return "Ratelimit-Reset"
	case "X-RateLimit-Limit":
		return "X-Ratelimit-Limit"
	case "X-RateLimit-Remaining":
		return "X-Ratelimit-Remaining"
	case "X-RateLimit-Reset":
		return "X-Ratelimit-Reset"
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}

// NewContext is ctx carrying d, for FromContext.
func NewContext(ctx context.Context, d *Decision) context.Context {
	return context.WithValue(ctx, decisionKey{}, d)
}

// Logger is the limiter's logger (Options.Logger, else slog.Default()).
func (c *core) Logger() *slog.Logger { return c.logger }

// Pace waits the verdict's Delay (Throttle) unless ctx ends first: false then.
func (v Verdict) Pace(ctx context.Context) bool {
	return v.Delay <= 0 || sleep(ctx, v.Delay)
}
