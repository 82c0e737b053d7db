package ratelimit_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

func TestIPKey(t *testing.T) {
	cases := []struct {
		address string
		subnet  int
		want    string
	}{
		{"203.0.113.7", 56, "ip:203.0.113.7"},
		{"::ffff:203.0.113.7", 56, "ip:203.0.113.7"},
		{"2001:db8:0:12ff:1:2:3:4", 56, "ip6:2001:db8:0:1200::/56"},
		{"2001:db8:0:12ff:1:2:3:4", 48, "ip6:2001:db8::/48"},
		{"2001:db8:0:12ff:1:2:3:4", 64, "ip6:2001:db8:0:12ff::/64"},
		{"2001:DB8::1", ratelimit.WholeIPv6, "ip6:2001:db8::1"},
		{"fe80::1%eth0", 128, "ip6:fe80::1/128"},
		{"not an address", 56, "ip:not an address"},
	}
	for _, c := range cases {
		if got := ratelimit.IPKey(c.address, c.subnet); got != c.want {
			t.Errorf("IPKey(%q, %d) = %q, want %q", c.address, c.subnet, got, c.want)
		}
	}
}

func TestByIPAndByUser(t *testing.T) {
	ctx := context.Background()
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "[2001:db8::5]:5000"
	req.Header.Add("X-Forwarded-For", "10.0.0.1, 203.0.113.9")
	req.Header.Add("X-Forwarded-For", "198.51.100.4")
	for proxies, want := range map[int]string{0: "ip6:2001:db8::/56", 1: "ip:198.51.100.4", 2: "ip:203.0.113.9", 3: "ip:10.0.0.1", 4: "ip6:2001:db8::/56"} {
		if got, err := ratelimit.ByIP(ratelimit.IPOptions{TrustedProxies: proxies})(ctx, req); err != nil || got != want {
			t.Errorf("%d proxies: %q %v, want %q", proxies, got, err, want)
		}
	}
	req.RemoteAddr = ""
	if _, err := ratelimit.ByIP(ratelimit.IPOptions{})(ctx, req); !errors.Is(err, ratelimit.ErrNoAddress) {
		t.Fatalf("no address: %v", err)
	}
	req.RemoteAddr = "192.0.2.1:80"
	user := func(r *http.Request) string { return r.Header.Get("X-Test-User") }
	if got, _ := ratelimit.ByUser(user, ratelimit.IPOptions{})(ctx, req); got != "ip:192.0.2.1" {
		t.Fatal(got)
	}
	req.Header.Set("X-Test-User", "42")
	if got, _ := ratelimit.ByUser(user, ratelimit.IPOptions{})(ctx, req); got != "user:42" {
		t.Fatal(got)
	}
	if err := ratelimit.CheckIP(ratelimit.IPOptions{IPv6Subnet: 129}); err == nil || err.Error() != "ipv6Subnet: must be an integer from 1 to 128, or WholeIPv6 (got 129)" {
		t.Fatal(err)
	}
}
