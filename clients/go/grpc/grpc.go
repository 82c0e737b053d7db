// Package grpc is the limiter as gRPC unary and stream server
// interceptors. A denial ends the call with codes.ResourceExhausted and a
// google.rpc.RetryInfo detail carrying the wait (none when the call can
// never be admitted); Redis unavailable with a Closed limit, and a closed
// limiter, end it with codes.Unavailable. The rate-limit fields go out as
// header metadata (lower-case names) as Options.Headers picks them; the
// decision is on the handler's context (ratelimit.FromContext); a
// concurrency slot is held until the handler returns, whatever the client
// does.
package grpc

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// Call is what a limiter of gRPC calls decides: one RPC. Key, limit and
// cost functions get it with the call's context, which carries the peer
// (google.golang.org/grpc/peer) and the incoming metadata.
type Call struct {
	// FullMethod is /package.Service/Method.
	FullMethod string
	// Request is a unary call's request message; nil for a stream.
	Request any
}

// Options configure the interceptors. Zero fields take their defaults.
type Options struct {
	// Headers picks the rate-limit fields sent as header metadata:
	// ratelimit.HeadersDraft10 when empty.
	Headers ratelimit.Headers
	// Message is the status message of a denial that can pass later:
	// ratelimit.DefaultMessage when empty.
	Message string
	// SkipFailedRequests: a call whose handler returns an error gives its units back.
	SkipFailedRequests bool
	// SkipSuccessfulRequests: a call whose handler returns no error gives its units back.
	SkipSuccessfulRequests bool
	// Throttle: an admitted call waits its leaky-bucket delay before its handler runs.
	Throttle bool
	// Skip, when it returns true, lets a call through unchecked, without metadata.
	Skip func(ctx context.Context, fullMethod string) bool
	// OnError turns a server error (an error reply from Redis, a key
	// function's error) into the error the call ends with; when nil the
	// error is logged and the call ends with codes.Internal.
	OnError func(ctx context.Context, err error) error
}

type interceptor struct {
	gate   *ratelimit.Gate[Call]
	opts   Options
	logger interface{ Error(string, ...any) }
}

func newInterceptor(l *ratelimit.Limiter[Call], opts Options) (*interceptor, error) {
	gate, err := ratelimit.NewGate(l, ratelimit.HTTPOptions{Headers: opts.Headers, Message: opts.Message,
		SkipFailedRequests: opts.SkipFailedRequests, SkipSuccessfulRequests: opts.SkipSuccessfulRequests, Throttle: opts.Throttle})
	if err != nil {
		return nil, err
	}
	if opts.Message == "" {
		opts.Message = ratelimit.DefaultMessage
	}
	return &interceptor{gate: gate, opts: opts, logger: l.Logger()}, nil
}

// UnaryServerInterceptor limits unary calls with l.
func UnaryServerInterceptor(l *ratelimit.Limiter[Call], opts Options) (grpc.UnaryServerInterceptor, error) {
	i, err := newInterceptor(l, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (reply any, err error) {
		if i.opts.Skip != nil && i.opts.Skip(ctx, info.FullMethod) {
			return handler(ctx, req)
		}
		err = i.run(ctx, Call{FullMethod: info.FullMethod, Request: req}, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) },
			func(ctx context.Context) (err error) {
				reply, err = handler(ctx, req)
				return err
			})
		return reply, err
	}, nil
}

// StreamServerInterceptor limits streaming calls with l: the check is made
// once, when the stream opens; a slot is held until the handler returns.
func StreamServerInterceptor(l *ratelimit.Limiter[Call], opts Options) (grpc.StreamServerInterceptor, error) {
	i, err := newInterceptor(l, opts)
	if err != nil {
		return nil, err
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if i.opts.Skip != nil && i.opts.Skip(ss.Context(), info.FullMethod) {
			return handler(srv, ss)
		}
		return i.run(ss.Context(), Call{FullMethod: info.FullMethod}, ss.SetHeader, func(ctx context.Context) error {
			return handler(srv, &stream{ServerStream: ss, ctx: ctx})
		})
	}, nil
}

// stream is a server stream whose context carries the decision.
type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *stream) Context() context.Context { return s.ctx }

// run decides call, sends the fields, and runs handler when admitted,
// giving back what the options say once it returns.
func (i *interceptor) run(ctx context.Context, call Call, setHeader func(metadata.MD) error, handler func(context.Context) error) (err error) {
	v, err := i.gate.Decide(ctx, call)
	switch {
	case errors.Is(err, ratelimit.ErrClosed):
		return status.Error(codes.Unavailable, err.Error())
	case err != nil:
		if i.opts.OnError != nil {
			return i.opts.OnError(ctx, err)
		}
		i.logger.Error("rate limiter: " + err.Error())
		return status.Error(codes.Internal, "rate limiter error")
	}
	if len(v.Fields) > 0 {
		md := make(metadata.MD, len(v.Fields))
		for _, f := range v.Fields {
			md[strings.ToLower(f.Name)] = []string{f.Value}
		}
		_ = setHeader(md) // fails only once headers went out: they cannot have
	}
	switch {
	case v.Decision == nil && v.Status != 0:
		return status.Error(codes.Unavailable, ratelimit.ErrUnavailable.Error())
	case v.Status != 0:
		return denied(v.Decision, i.opts.Message)
	}
	if v.Decision != nil && len(v.Decision.Limits) > 0 {
		ctx = ratelimit.NewContext(ctx, v.Decision)
	}
	// Released when the handler returns, also by a panic: never when the client leaves.
	defer func() {
		code := http.StatusOK
		if err != nil {
			code = http.StatusInternalServerError // failed, for SkipFailedRequests
		}
		i.gate.Done(ctx, v, code)
	}()
	if !v.Pace(ctx) {
		return status.FromContextError(ctx.Err()).Err()
	}
	return handler(ctx)
}

// denied is the status a denial ends the call with.
func denied(d *ratelimit.Decision, message string) error {
	if d.NeverAllowed {
		return status.Error(codes.ResourceExhausted, ratelimit.NeverMessage)
	}
	st, err := status.New(codes.ResourceExhausted, message).WithDetails(&errdetails.RetryInfo{
		RetryDelay: durationpb.New(time.Duration(d.RetryAfterMs) * time.Millisecond),
	})
	if err != nil { // a RetryInfo always marshals
		return status.Error(codes.ResourceExhausted, message)
	}
	return st.Err()
}
