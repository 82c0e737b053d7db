package ratelimit

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/dunglas/httpsfv"
)

// A decision as HTTP header fields: draft-ietf-httpapi-ratelimit-headers
// (revision 10: RateLimit-Policy and RateLimit), its earlier revisions'
// RateLimit-Limit/-Remaining/-Reset (draft-6), X-RateLimit-* (legacy), and
// Retry-After on every denial that can pass later. docs/clients.md says
// what each value is and why; the Node and Python clients send the same.

// Headers picks the rate-limit fields a response carries.
type Headers string

const (
	// HeadersDraft10 (the default): RateLimit-Policy and RateLimit, every limit.
	HeadersDraft10 Headers = "draft-10"
	// HeadersDraft6: RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset (seconds), one limit.
	HeadersDraft6 Headers = "draft-6"
	// HeadersLegacy: X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (Unix seconds), one limit.
	HeadersLegacy Headers = "legacy"
	// HeadersNone: no rate-limit fields (Retry-After still goes on a 429).
	HeadersNone Headers = "none"
)

// Field is one header field.
type Field struct{ Name, Value string }

// sfMax: Structured Fields Integers stop at 15 digits.
const sfMax = 999_999_999_999_999

func (h Headers) check() (Headers, error) {
	switch h {
	case "":
		return HeadersDraft10, nil
	case HeadersDraft10, HeadersDraft6, HeadersLegacy, HeadersNone:
		return h, nil
	}
	return h, configError("headers", "must be %q, %q, %q or %q (got %q)", HeadersDraft10, HeadersDraft6, HeadersLegacy, HeadersNone, h)
}

// Fields are the fields for d under this choice ("" is draft-10), Retry-After
// included on a denial that can pass later; now is the clock for legacy's
// X-RateLimit-Reset. A decision without limits (Redis unavailable, the
// request let through) has none.
func (h Headers) Fields(d *Decision, now time.Time) []Field {
	var fields []Field
	if d == nil {
		return nil
	}
	if len(d.Limits) > 0 {
		switch h {
		case "", HeadersDraft10:
			fields = draft10(d)
		case HeadersDraft6, HeadersLegacy:
			l := closestToDenial(d)
			t := resetSeconds(l, d)
			if h == HeadersDraft6 {
				fields = []Field{{"RateLimit-Limit", itoa(l.Limit)}, {"RateLimit-Remaining", itoa(l.Remaining)}, {"RateLimit-Reset", itoa(max(t, 0))}}
			} else {
				unix := (now.UnixMilli() + 999) / 1000
				fields = []Field{{"X-RateLimit-Limit", itoa(l.Limit)}, {"X-RateLimit-Remaining", itoa(l.Remaining)}, {"X-RateLimit-Reset", itoa(unix + max(t, 0))}}
			}
		}
	}
	if !d.Allowed && d.RetryAfterMs >= 0 {
		fields = append(fields, Field{"Retry-After", itoa(seconds(d.RetryAfterMs))})
	}
	return fields
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// seconds is ms in whole seconds, rounded up.
func seconds(ms int64) int64 { return (ms + 999) / 1000 }

// draft10: one List member per limit, in the limiter's order (both values
// written into one buffer and made one string; room for Retry-After).
func draft10(d *Decision) []Field {
	var room [256]byte
	b := room[:0]
	for i, l := range d.Limits {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, sfString(l.Name)...)
		b = append(b, ";q="...)
		b = appendSFInteger(b, l.Limit)
		if l.QuotaUnit != "" && l.QuotaUnit != Requests {
			b = append(b, ";qu="...)
			b = append(b, sfString(string(l.QuotaUnit))...)
		}
		if l.Algorithm != Concurrency { // slots held at once have no window
			b = append(b, ";w="...)
			b = appendSFInteger(b, windowSeconds(l))
		}
	}
	policy := len(b)
	for i, l := range d.Limits {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, sfString(l.Name)...)
		b = append(b, ";r="...)
		b = appendSFInteger(b, l.Remaining)
		if t := resetSeconds(l, d); t >= 0 {
			b = append(b, ";t="...)
			b = appendSFInteger(b, t)
		}
	}
	values := string(b)
	fields := make([]Field, 2, 3)
	fields[0], fields[1] = Field{"RateLimit-Policy", values[:policy]}, Field{"RateLimit", values[policy:]}
	return fields
}

func appendSFInteger(b []byte, n int64) []byte {
	return strconv.AppendInt(b, min(max(n, 0), sfMax), 10)
}

// sfStrings: policy names and quota units as Structured Field Strings, made
// once each (they come from the limits' options: few).
var sfStrings sync.Map

func sfString(text string) string {
	if known, ok := sfStrings.Load(text); ok {
		return known.(string)
	}
	item, err := httpsfv.Marshal(httpsfv.NewItem(text))
	if err != nil { // names are checked printable ASCII: cannot happen
		item = strconv.Quote(text)
	}
	sfStrings.Store(text, item)
	return item
}

// windowSeconds is the draft's w: the time the whole quota takes to come
// back, whole seconds rounded up, at least 1 (buckets: limit / rate).
func windowSeconds(l LimitDecision) int64 {
	w := l.Param
	if isBucket(l.Algorithm) {
		w = float64(l.Limit) / l.Param
	}
	return max(1, int64(math.Ceil(w)))
}

// resetSeconds is the draft's t: seconds until more quota is available; -1
// when none will come (the limiter is fresh, or it can never admit).
func resetSeconds(l LimitDecision, d *Decision) int64 {
	if !d.Allowed && !l.Allowed {
		if l.RetryAfterMs == -1 {
			return -1
		}
		return seconds(d.RetryAfterMs)
	}
	if l.ResetAfterMs <= 0 {
		return -1
	}
	if isBucket(l.Algorithm) {
		// Units come back continuously: the next whole one is (limit -
		// remaining - 1) / rate before full. The reply's reset is rounded
		// up to a millisecond: take that back.
		next := float64(l.ResetAfterMs-1)/1000 - float64(l.Limit-l.Remaining-1)/l.Param
		return max(0, int64(math.Ceil(next)))
	}
	// Fixed window: its end. Sliding window and log: when fresh, an upper
	// bound. Concurrency: when the last lease runs out, an upper bound.
	return seconds(l.ResetAfterMs)
}

// closestToDenial is the one limit draft-6 and legacy carry: on a denial the
// denying limit with the longest wait, else the one with the fewest
// remaining (the first on a tie).
func closestToDenial(d *Decision) LimitDecision {
	best := -1
	for i, l := range d.Limits {
		if !d.Allowed {
			if l.Allowed {
				continue
			}
			if best < 0 || waitOf(l) > waitOf(d.Limits[best]) {
				best = i
			}
		} else if best < 0 || l.Remaining < d.Limits[best].Remaining {
			best = i
		}
	}
	if best < 0 {
		best = 0
	}
	return d.Limits[best]
}

// waitOf orders waits with never (-1) the longest.
func waitOf(l LimitDecision) int64 {
	if l.RetryAfterMs == -1 {
		return math.MaxInt64
	}
	return l.RetryAfterMs
}
