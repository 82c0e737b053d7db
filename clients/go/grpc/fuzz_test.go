package grpc

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// Whatever a client sends as x-forwarded-for or any metadata, and however
// many proxies are trusted, a key comes out (or an error), never a panic:
// ip: or ip6: for ByPeer, name:value for ByMetadata; and only a valid
// metadata key makes a ByMetadata.
func FuzzKeys(f *testing.F) {
	f.Add("198.51.100.9, 2001:db8:0:12ff::1", 1, "x-user", "alice")
	f.Add("", 0, "", "")
	f.Add(",,, ,", 3, "grpc-x", "a}b{c")
	f.Add("::ffff:10.0.0.1", 1, "user-bin", "\x00")
	f.Add("not an address", 1, "X-User", "v")
	f.Fuzz(func(t *testing.T, forwarded string, trusted int, name, value string) {
		trusted = min(max(trusted, 0), 4)
		md := metadata.Pairs("x-forwarded-for", forwarded)
		if checkMetadataKey(name) == nil {
			md.Append(name, value)
		}
		ctx := peer.NewContext(metadata.NewIncomingContext(context.Background(), md),
			&peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 5000}})
		key, err := ByPeer(ratelimit.IPOptions{TrustedProxies: trusted})(ctx, Call{})
		if err != nil || !(strings.HasPrefix(key, "ip:") || strings.HasPrefix(key, "ip6:")) {
			t.Fatalf("ByPeer: %q %v", key, err)
		}
		if trusted == 0 && key != "ip:203.0.113.7" {
			t.Fatalf("no trusted proxy, but %q", key)
		}
		if checkMetadataKey(name) != nil {
			return
		}
		key, err = ByMetadata(name)(ctx, Call{})
		if err == nil && key != name+":"+value || err != nil && value != "" {
			t.Fatalf("ByMetadata(%q): %q %v", name, key, err)
		}
	})
}
