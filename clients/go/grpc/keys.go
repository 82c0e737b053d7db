package grpc

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// ByPeer keys a call by its client's address as ratelimit.ByIP keys an
// HTTP request: the connection's peer, or with opts.TrustedProxies the
// address the outermost of your proxies saw, from the right end of the
// x-forwarded-for metadata (Envoy and most gRPC proxies send it). It
// panics on a bad option, as ratelimit.ByIP does.
func ByPeer(opts ratelimit.IPOptions) ratelimit.KeyFunc[Call] {
	byIP := ratelimit.ByIP(opts)
	return func(ctx context.Context, _ Call) (string, error) {
		// ByIP's own reading of an address: the peer as the remote address,
		// the metadata as the header.
		r := &http.Request{}
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			r.RemoteAddr = p.Addr.String()
		}
		if opts.TrustedProxies > 0 {
			md, _ := metadata.FromIncomingContext(ctx)
			r.Header = http.Header{"X-Forwarded-For": md.Get("x-forwarded-for")}
		}
		return byIP(ctx, r)
	}
}

// ByMetadata keys a call by the first value of its metadata name (lower
// case): name:value. Key only by what your authentication set or checked
// (a user id an auth interceptor put there, a verified API key): a client
// can send any metadata it likes. A call without it is a server error
// (codes.Internal unless Options.OnError says otherwise). It panics when
// name is not a valid metadata key.
func ByMetadata(name string) ratelimit.KeyFunc[Call] {
	if err := checkMetadataKey(name); err != nil {
		panic(err)
	}
	return func(ctx context.Context, _ Call) (string, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		values := md.Get(name)
		if len(values) == 0 || values[0] == "" {
			return "", fmt.Errorf("grpc.ByMetadata: the call carries no %s metadata", name)
		}
		return name + ":" + values[0], nil
	}
}

// checkMetadataKey: gRPC's key characters (lower case letters, digits, -
// _ .), not a reserved grpc- key, not a binary -bin one.
func checkMetadataKey(name string) error {
	if name == "" {
		return fmt.Errorf("grpc.ByMetadata: empty metadata key")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("grpc.ByMetadata: %q: a metadata key is lower case letters, digits, - _ and .", name)
		}
	}
	if strings.HasPrefix(name, "grpc-") {
		return fmt.Errorf("grpc.ByMetadata: %q: grpc- keys are gRPC's own", name)
	}
	if strings.HasSuffix(name, "-bin") {
		return fmt.Errorf("grpc.ByMetadata: %q: a -bin key holds bytes, not text", name)
	}
	return nil
}
