package ratelimit

import (
	"net/http"
	"net/textproto"
	"testing"
)

// canonicalKey is what http.Header would make of each field's name.
func TestCanonicalKey(t *testing.T) {
	for _, name := range []string{"RateLimit", "RateLimit-Policy", "Retry-After", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset",
		"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Other-field"} {
		if got := canonicalKey(name); got != textproto.CanonicalMIMEHeaderKey(name) {
			t.Errorf("%s: %s", name, got)
		}
	}
	h := http.Header{}
	SetFields(h, []Field{{"RateLimit", `"a";r=1`}, {"Retry-After", "5"}})
	SetFields(h, []Field{{"RateLimit", `"b";r=2`}, {"Retry-After", "3"}})
	if h.Get("RateLimit") != `"a";r=1, "b";r=2` || h.Get("Retry-After") != "5" || len(h) != 2 {
		t.Fatal(h)
	}
}
