package grpc_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	rlgrpc "github.com/redis-ratelimit/redis-ratelimit/clients/go/grpc"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/adaptertest"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// health is the service under the interceptors, by the request's service name:
// "slow" runs until finish is closed (counting handlers at once), "fail"
// fails, any other answers SERVING; each sends the first limit's name and
// outcome from ratelimit.FromContext as the trailer "decision".
type health struct {
	grpc_health_v1.UnimplementedHealthServer
	mu            sync.Mutex
	running, most int
	entered       chan struct{}
	finish        chan struct{}
	done          sync.WaitGroup
}

func newHealth() *health {
	return &health{entered: make(chan struct{}, 16), finish: make(chan struct{})}
}

func (h *health) work(ctx context.Context, service string) error {
	switch service {
	case "slow":
		h.mu.Lock()
		h.running++
		h.most = max(h.most, h.running)
		h.done.Add(1)
		h.mu.Unlock()
		h.entered <- struct{}{}
		<-h.finish
		h.mu.Lock()
		h.running--
		h.mu.Unlock()
		h.done.Done()
	case "fail":
		return status.Error(codes.NotFound, "no")
	}
	return nil
}

func (h *health) Check(ctx context.Context, req *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	grpc.SetTrailer(ctx, metadata.Pairs("decision", adaptertest.Decision(ratelimit.FromContext(ctx))))
	if err := h.work(ctx, req.Service); err != nil {
		return nil, err
	}
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

func (h *health) Watch(req *grpc_health_v1.HealthCheckRequest, stream grpc_health_v1.Health_WatchServer) error {
	stream.SetTrailer(metadata.Pairs("decision", adaptertest.Decision(ratelimit.FromContext(stream.Context()))))
	if err := h.work(stream.Context(), req.Service); err != nil {
		return err
	}
	return stream.Send(&grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING})
}

// serve runs the health service behind both interceptors over l on a free
// port; a client of it. Both stop when the test ends.
func serve(t *testing.T, l *ratelimit.Limiter[rlgrpc.Call], opts rlgrpc.Options, h *health) grpc_health_v1.HealthClient {
	t.Helper()
	unary, err := rlgrpc.UnaryServerInterceptor(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	streams, err := rlgrpc.StreamServerInterceptor(l, opts)
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer(grpc.UnaryInterceptor(unary), grpc.StreamInterceptor(streams))
	grpc_health_v1.RegisterHealthServer(server, h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go server.Serve(ln)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		server.Stop()
	})
	return grpc_health_v1.NewHealthClient(conn)
}

// answer is one call's outcome: its status, header metadata and trailer.
type answer struct {
	status  *status.Status
	header  metadata.MD
	trailer metadata.MD
}

func (a answer) get(key string) string {
	if v := a.header.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// retryDelay is the status's RetryInfo delay, -1 when it has none.
func (a answer) retryDelay() time.Duration {
	for _, d := range a.status.Details() {
		if info, ok := d.(*errdetails.RetryInfo); ok {
			return info.RetryDelay.AsDuration()
		}
	}
	return -1
}

func unary(t *testing.T, c grpc_health_v1.HealthClient, service string, md ...string) answer {
	t.Helper()
	var a answer
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs(md...))
	_, err := c.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: service}, grpc.Header(&a.header), grpc.Trailer(&a.trailer))
	a.status = status.Convert(err)
	return a
}

func streamed(t *testing.T, c grpc_health_v1.HealthClient, service string) answer {
	t.Helper()
	var a answer
	s, err := c.Watch(context.Background(), &grpc_health_v1.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	if err == nil { // the trailer is there once the stream ended
		if _, end := s.Recv(); end != io.EOF {
			t.Fatalf("after the one response: %v", end)
		}
	}
	a.header, _ = s.Header()
	a.status = status.Convert(err)
	a.trailer = s.Trailer()
	return a
}

func perPeer(limit int64, window float64) []ratelimit.Limit[rlgrpc.Call] {
	return []ratelimit.Limit[rlgrpc.Call]{{Name: "per-peer", Algorithm: ratelimit.SlidingLog, Limit: limit, Window: window}}
}

func TestGRPC(t *testing.T) {
	for _, m := range adaptertest.Modes {
		t.Run(m.Name, func(t *testing.T) {
			redis := m.Start(t)
			limiter := func(t *testing.T, prefix string, limits []ratelimit.Limit[rlgrpc.Call]) *ratelimit.Limiter[rlgrpc.Call] {
				return adaptertest.Limiter(t, redis, m, ratelimit.Options[rlgrpc.Call]{Limits: limits, Key: rlgrpc.ByPeer(ratelimit.IPOptions{}), Prefix: prefix})
			}

			t.Run("unary denied", func(t *testing.T) {
				c := serve(t, limiter(t, "u:", perPeer(2, 60)), rlgrpc.Options{}, newHealth())
				for i, remaining := range []string{"1", "0"} {
					a := unary(t, c, "")
					if a.status.Code() != codes.OK || a.get("ratelimit-policy") != `"per-peer";q=2;w=60` || a.get("ratelimit") != `"per-peer";r=`+remaining+`;t=60` ||
						a.trailer.Get("decision")[0] != "per-peer allowed" {
						t.Fatalf("call %d: %+v", i, a)
					}
				}
				a := unary(t, c, "")
				if a.status.Code() != codes.ResourceExhausted || a.status.Message() != ratelimit.DefaultMessage ||
					a.retryDelay() <= 58*time.Second || a.retryDelay() > 60*time.Second ||
					a.get("retry-after") != "60" || a.get("ratelimit") != `"per-peer";r=0;t=60` {
					t.Fatalf("denied: %+v %v", a, a.retryDelay())
				}
				if got := redis.Do("EXISTS", "u:{ip:127.0.0.1}:per-peer"); got != "1" {
					t.Fatal("not keyed by the peer's address")
				}
			})

			t.Run("stream denied", func(t *testing.T) {
				c := serve(t, limiter(t, "s:", perPeer(1, 60)), rlgrpc.Options{Headers: ratelimit.HeadersDraft6, Message: "Easy."}, newHealth())
				a := streamed(t, c, "")
				if a.status.Code() != codes.OK || a.get("ratelimit-limit") != "1" || a.get("ratelimit-remaining") != "0" || a.get("ratelimit-reset") != "60" || a.trailer.Get("decision")[0] != "per-peer allowed" {
					t.Fatalf("%+v", a)
				}
				a = streamed(t, c, "")
				if a.status.Code() != codes.ResourceExhausted || a.status.Message() != "Easy." || a.retryDelay() <= 58*time.Second || a.get("ratelimit-reset") != "60" {
					t.Fatalf("denied: %+v", a)
				}
			})

			t.Run("never admissible", func(t *testing.T) {
				limits := []ratelimit.Limit[rlgrpc.Call]{{Name: "per-peer", Algorithm: ratelimit.SlidingLog, Limit: 2, Window: 60, Cost: 3}}
				c := serve(t, limiter(t, "n:", limits), rlgrpc.Options{Headers: ratelimit.HeadersNone}, newHealth())
				a := unary(t, c, "")
				if a.status.Code() != codes.ResourceExhausted || a.status.Message() != ratelimit.NeverMessage || a.retryDelay() != -1 || len(a.header) != 0 {
					t.Fatalf("%+v", a)
				}
			})

			t.Run("skip and skip failed requests", func(t *testing.T) {
				c := serve(t, limiter(t, "k:", perPeer(2, 60)), rlgrpc.Options{SkipFailedRequests: true,
					Skip: func(ctx context.Context, method string) bool { return method == "/grpc.health.v1.Health/Watch" }}, newHealth())
				for i := 0; i < 4; i++ {
					if a := unary(t, c, "fail"); a.status.Code() != codes.NotFound || a.get("ratelimit") != `"per-peer";r=1;t=60` {
						t.Fatalf("failed call %d: %+v", i, a)
					}
					if a := streamed(t, c, ""); a.status.Code() != codes.OK || a.get("ratelimit") != "" || a.trailer.Get("decision")[0] != "no decision" {
						t.Fatalf("skipped: %+v", a)
					}
				}
				for _, remaining := range []string{"1", "0"} {
					if a := unary(t, c, ""); a.status.Code() != codes.OK || a.get("ratelimit") != `"per-peer";r=`+remaining+`;t=60` {
						t.Fatalf("%+v", a)
					}
				}
			})

			t.Run("server errors", func(t *testing.T) {
				c := serve(t, limiter(t, "e:", perPeer(2, 60)), rlgrpc.Options{}, newHealth())
				redis.Do("SET", "e:{ip:127.0.0.1}:per-peer", "not a limiter")
				if a := unary(t, c, ""); a.status.Code() != codes.Internal || a.status.Message() != "rate limiter error" {
					t.Fatalf("%+v", a)
				}
				byUser := adaptertest.Limiter(t, redis, m, ratelimit.Options[rlgrpc.Call]{Limits: perPeer(2, 60), Key: rlgrpc.ByMetadata("x-user"), Prefix: "md:"})
				c = serve(t, byUser, rlgrpc.Options{OnError: func(ctx context.Context, err error) error {
					return status.Error(codes.Unauthenticated, err.Error())
				}}, newHealth())
				if a := unary(t, c, ""); a.status.Code() != codes.Unauthenticated || a.status.Message() != `ratelimit: key of limit "per-peer": grpc.ByMetadata: the call carries no x-user metadata` {
					t.Fatalf("%+v", a)
				}
				if a := unary(t, c, "", "x-user", "alice"); a.status.Code() != codes.OK || redis.Do("EXISTS", "md:{x-user:alice}:per-peer") != "1" {
					t.Fatalf("%+v", a)
				}
			})

			t.Run("unavailable and closed", func(t *testing.T) {
				gone := m.Start(t)
				l := adaptertest.Limiter(t, gone, m, ratelimit.Options[rlgrpc.Call]{Limits: perPeer(2, 60), Key: rlgrpc.ByPeer(ratelimit.IPOptions{}),
					OnUnavailable: ratelimit.Closed, Timeout: 500 * time.Millisecond})
				c := serve(t, l, rlgrpc.Options{}, newHealth())
				gone.Kill()
				if a := unary(t, c, ""); a.status.Code() != codes.Unavailable || a.status.Message() != "rate limiter unavailable" {
					t.Fatalf("%+v", a)
				}
				l.Close()
				if a := streamed(t, c, ""); a.status.Code() != codes.Unavailable || a.status.Message() != "rate limiter closed" {
					t.Fatalf("%+v", a)
				}
			})

			for _, call := range []string{"unary", "stream"} {
				t.Run(call+" slot held until the handler returns", func(t *testing.T) {
					prefix := call[:1] + "c:"
					h := newHealth()
					c := serve(t, limiter(t, prefix, []ratelimit.Limit[rlgrpc.Call]{{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: 1, Lease: 30}}), rlgrpc.Options{}, h)
					ctx, cancel := context.WithCancel(context.Background())
					aborted := make(chan error)
					go func() {
						var err error
						if call == "unary" {
							_, err = c.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "slow"})
						} else if s, err2 := c.Watch(ctx, &grpc_health_v1.HealthCheckRequest{Service: "slow"}); err2 != nil {
							err = err2
						} else {
							_, err = s.Recv()
						}
						aborted <- err
					}()
					<-h.entered
					cancel() // the client leaves; the handler goes on
					if err := <-aborted; status.Code(err) != codes.Canceled {
						t.Fatalf("the aborted call: %v", err)
					}
					for i := 0; i < 3; i++ {
						if a := unary(t, c, ""); a.status.Code() != codes.ResourceExhausted || a.retryDelay() != time.Second || a.get("ratelimit-policy") != `"inflight";q=1;qu="concurrent-requests"` {
							t.Fatalf("while the slow handler runs: %+v", a)
						}
					}
					close(h.finish)
					h.done.Wait()
					for i := 0; ; i++ { // the release follows the handler's return
						if a := unary(t, c, ""); a.status.Code() == codes.OK {
							break
						}
						if i == 50 {
							t.Fatal("the slot was not released")
						}
						time.Sleep(20 * time.Millisecond)
					}
					if h.most != 1 {
						t.Fatalf("%d handlers at once", h.most)
					}
				})
			}
		})
	}
}

// Options are checked when an interceptor is made.
func TestGRPCOptions(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	l := adaptertest.Limiter(t, redis, adaptertest.Modes[0], ratelimit.Options[rlgrpc.Call]{Limits: perPeer(2, 60), Key: rlgrpc.ByPeer(ratelimit.IPOptions{})})
	if _, err := rlgrpc.UnaryServerInterceptor(l, rlgrpc.Options{Headers: "draft-7"}); err == nil || err.Error() != `headers: must be "draft-10", "draft-6", "legacy" or "none" (got "draft-7")` {
		t.Fatal(err)
	}
	if _, err := rlgrpc.StreamServerInterceptor(nil, rlgrpc.Options{}); err == nil || err.Error() != "limiter: required" {
		t.Fatal(err)
	}
	for _, name := range []string{"", "X-User", "grpc-user", "user-bin", "user id"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("ByMetadata(%q) did not panic", name)
				}
			}()
			rlgrpc.ByMetadata(name)
		}()
	}
}
