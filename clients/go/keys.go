package ratelimit

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Whom a request counts against: its client address, or its signed-in user.

// WholeIPv6, as IPOptions.IPv6Subnet, keys IPv6 clients by their whole address.
const WholeIPv6 = -1

// IPOptions configure ByIP.
type IPOptions struct {
	// IPv6Subnet groups IPv6 addresses by their first bits (one customer
	// usually gets a whole /56 and could rotate through it): 56 when 0,
	// 1..128, or WholeIPv6.
	IPv6Subnet int
	// TrustedProxies is how many proxies you run stand before the app: the
	// address the outermost of them saw, from the right end of
	// X-Forwarded-For, is the client's. 0 (the default) trusts no header:
	// the connection's peer is the client. Set it only to exactly the
	// number of your proxies, or clients could choose their own key.
	TrustedProxies int
}

func (o IPOptions) check() (IPOptions, error) {
	switch {
	case o.IPv6Subnet == 0:
		o.IPv6Subnet = 56
	case o.IPv6Subnet != WholeIPv6 && (o.IPv6Subnet < 1 || o.IPv6Subnet > 128):
		return o, configError("ipv6Subnet", "must be an integer from 1 to 128, or WholeIPv6 (got %d)", o.IPv6Subnet)
	}
	if o.TrustedProxies < 0 {
		return o, configError("trustedProxies", "must be an integer >= 0 (got %d)", o.TrustedProxies)
	}
	return o, nil
}

// ErrNoAddress: a request without a client address (a Unix socket, no
// request at all). Keying all such requests alike would give every caller
// one budget: give the limiter a Key that names the caller.
var ErrNoAddress = errors.New("ByIP: the request carries no client address: give the limiter a Key function that names the caller")

// ByIP keys a request by its client address: ip:203.0.113.7, IPv6 by its
// /56 (ip6:2001:db8:0:1200::/56), IPv4-mapped IPv6 as IPv4. It panics on a
// bad option (a programming error, as regexp.MustCompile does); CheckIP
// says what is wrong instead.
func ByIP(opts IPOptions) KeyFunc[*http.Request] {
	checked, err := opts.check()
	if err != nil {
		panic(err)
	}
	return func(_ context.Context, r *http.Request) (string, error) {
		address, err := clientAddress(r, checked.TrustedProxies)
		if err != nil {
			return "", err
		}
		return IPKey(address, checked.IPv6Subnet), nil
	}
}

// CheckIP reports whether opts are good options for ByIP.
func CheckIP(opts IPOptions) error {
	_, err := opts.check()
	return err
}

// clientAddress is the connection's peer, or with trusted proxies the address the outermost one saw.
func clientAddress(r *http.Request, trustedProxies int) (string, error) {
	if r == nil {
		return "", errors.New("ByIP: no request to key by: pass the request, or give the limiter a Key function")
	}
	if trustedProxies > 0 {
		var forwarded []string
		for _, header := range r.Header.Values("X-Forwarded-For") {
			for _, address := range strings.Split(header, ",") {
				if address = strings.TrimSpace(address); address != "" {
					forwarded = append(forwarded, address)
				}
			}
		}
		if len(forwarded) >= trustedProxies {
			return forwarded[len(forwarded)-trustedProxies], nil
		}
	}
	address := r.RemoteAddr
	if host, _, err := net.SplitHostPort(address); err == nil {
		address = host
	}
	if address == "" || address == "@" {
		return "", ErrNoAddress
	}
	return address, nil
}

// IPKey is the key of an address: ip:<IPv4>, ip6:<prefix>/<bits> (the
// whole address with WholeIPv6); an address that does not parse is kept as
// it is, after ip:.
func IPKey(address string, ipv6Subnet int) string {
	parsed, err := netip.ParseAddr(strings.TrimSpace(address))
	if err != nil {
		return "ip:" + address
	}
	parsed = parsed.Unmap().WithZone("")
	var room [64]byte // the key written here, then made a string: one allocation
	if parsed.Is4() {
		return string(parsed.AppendTo(append(room[:0], "ip:"...)))
	}
	if ipv6Subnet == WholeIPv6 {
		return string(parsed.AppendTo(append(room[:0], "ip6:"...)))
	}
	prefix, err := parsed.Prefix(ipv6Subnet)
	if err != nil {
		return string(parsed.AppendTo(append(room[:0], "ip6:"...)))
	}
	return string(prefix.AppendTo(append(room[:0], "ip6:"...)))
}

// ByUser keys a request by its authenticated identity, user:<id>, where
// user gives it (from what your auth middleware put on the request or its
// context; "" for an anonymous request), and anonymous requests by address
// as ByIP(ip) does. Never key by a header the client may invent.
func ByUser(user func(*http.Request) string, ip IPOptions) KeyFunc[*http.Request] {
	byIP := ByIP(ip)
	return func(ctx context.Context, r *http.Request) (string, error) {
		if r != nil {
			if id := user(r); id != "" {
				return "user:" + id, nil
			}
		}
		return byIP(ctx, r)
	}
}

// defaultKey is ByIP for *http.Request, nil for other request types.
func defaultKey[R any]() KeyFunc[R] {
	if key, ok := any(ByIP(IPOptions{})).(KeyFunc[R]); ok {
		return key
	}
	return nil
}
