// Package fiber is the limiter as Fiber (v2, fasthttp underneath)
// middleware: the rate-limit fields on every response, a 429 with the
// JSON body of docs/clients.md on a denial, 503 while Redis cannot answer
// and a limit is Closed, the decision among the context's locals
// (FromContext), and a concurrency slot held until the next handler
// returns, whatever the client does.
//
// A limiter of *fiber.Ctx has no default key: give it Key ByIP (the
// address Fiber's c.IP() gives, honouring the app's ProxyHeader and
// TrustedProxies settings) or a function of your own.
package fiber

import (
	"context"
	"errors"
	"net/http"

	"github.com/gofiber/fiber/v2"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// Options configure the middleware.
type Options struct {
	ratelimit.HTTPOptions
	// Skip, when it returns true, lets a request through unchecked, without headers.
	Skip func(*fiber.Ctx) bool
	// Handler replaces the 429 answer (the rate-limit fields are set already).
	Handler func(*fiber.Ctx, *ratelimit.Decision) error
	// OnError answers a server error (an error reply from Redis, a key
	// function's error); when nil the middleware returns a *fiber.Error of
	// 500, for Fiber's error handler, and logs err.
	OnError func(*fiber.Ctx, error) error
}

// LocalsKey is the key of the decision among the context's locals.
const LocalsKey = "ratelimit"

// FromContext is the decision the middleware made for c's request; nil when
// there is none (skipped, or Redis unavailable with every limit Open).
func FromContext(c *fiber.Ctx) *ratelimit.Decision {
	d, _ := c.Locals(LocalsKey).(*ratelimit.Decision)
	return d
}

// ByIP keys a request by the address c.IP() gives: Fiber's ProxyHeader
// and TrustedProxies settings say whether a header names it. It panics on
// a bad option, as ratelimit.ByIP does; opts.TrustedProxies must be 0 (the
// app's settings rule).
func ByIP(opts ratelimit.IPOptions) ratelimit.KeyFunc[*fiber.Ctx] {
	if opts.TrustedProxies != 0 {
		panic("fiber.ByIP: trustedProxies: Fiber's ProxyHeader and TrustedProxies settings say which address c.IP() gives: leave it 0")
	}
	if err := ratelimit.CheckIP(opts); err != nil {
		panic(err)
	}
	subnet := opts.IPv6Subnet
	if subnet == 0 {
		subnet = 56
	}
	return func(_ context.Context, c *fiber.Ctx) (string, error) {
		address := c.IP()
		if address == "" {
			return "", ratelimit.ErrNoAddress
		}
		return ratelimit.IPKey(address, subnet), nil
	}
}

// Middleware is Fiber middleware over l.
func Middleware(l *ratelimit.Limiter[*fiber.Ctx], opts Options) (fiber.Handler, error) {
	gate, err := ratelimit.NewGate(l, opts.HTTPOptions)
	if err != nil {
		return nil, err
	}
	return func(c *fiber.Ctx) (err error) {
		if opts.Skip != nil && opts.Skip(c) {
			return c.Next()
		}
		ctx := c.UserContext()
		v, err := gate.Decide(ctx, c)
		if err != nil {
			if opts.OnError != nil {
				return opts.OnError(c, err)
			}
			l.Logger().Error("rate limiter: " + err.Error())
			return fiber.ErrInternalServerError
		}
		for _, f := range v.Fields {
			c.Set(f.Name, ratelimit.MergeField(c.GetRespHeader(f.Name), f))
		}
		if v.Decision != nil && len(v.Decision.Limits) > 0 {
			c.Locals(LocalsKey, v.Decision)
		}
		if v.Status != 0 {
			if v.Decision != nil && opts.Handler != nil {
				return opts.Handler(c, v.Decision)
			}
			c.Set(fiber.HeaderContentType, ratelimit.JSONContentType)
			return c.Status(v.Status).Send(v.Body)
		}
		// Released when next returns, also by a panic: never when the client leaves.
		defer func() { gate.Done(ctx, v, status(c, err)) }()
		if !v.Pace(ctx) {
			return ctx.Err()
		}
		return c.Next()
	}, nil
}

// status is the response's status: what Fiber's error handler will write
// for err, else what was set.
func status(c *fiber.Ctx, err error) int {
	if err == nil {
		return c.Response().StatusCode()
	}
	var fiberError *fiber.Error
	if errors.As(err, &fiberError) {
		return fiberError.Code
	}
	return http.StatusInternalServerError
}
