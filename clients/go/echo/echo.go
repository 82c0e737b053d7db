// Package echo is the limiter as Echo (v4) middleware: the rate-limit
// fields on every response, a 429 with the JSON body of docs/clients.md
// on a denial, 503 while Redis cannot answer and a limit is Closed, the
// decision among the context's values (FromContext), and a concurrency
// slot held until the next handler returns, whatever the client does.
//
// The limiter is the net/http one (ratelimit.Limiter[*http.Request]): its
// default key is ratelimit.ByIP, which reads X-Forwarded-For only as its
// TrustedProxies says (not Echo's IPExtractor).
package echo

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// Options configure the middleware.
type Options struct {
	ratelimit.HTTPOptions
	// Skip, when it returns true, lets a request through unchecked, without headers.
	Skip func(echo.Context) bool
	// Handler replaces the 429 answer (the rate-limit fields are set already).
	Handler func(echo.Context, *ratelimit.Decision) error
	// OnError answers a server error (an error reply from Redis, a key
	// function's error); when nil the middleware returns an
	// *echo.HTTPError of 500 with err inside, for Echo's error handler.
	OnError func(echo.Context, error) error
}

// ContextKey is the key of the decision among the Echo context's values.
const ContextKey = "ratelimit"

// FromContext is the decision the middleware made for c's request; nil when
// there is none (skipped, or Redis unavailable with every limit Open).
func FromContext(c echo.Context) *ratelimit.Decision {
	d, _ := c.Get(ContextKey).(*ratelimit.Decision)
	return d
}

// Middleware is Echo middleware over l.
func Middleware(l *ratelimit.Limiter[*http.Request], opts Options) (echo.MiddlewareFunc, error) {
	gate, err := ratelimit.NewGate(l, opts.HTTPOptions)
	if err != nil {
		return nil, err
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			if opts.Skip != nil && opts.Skip(c) {
				return next(c)
			}
			r := c.Request()
			v, err := gate.Decide(r.Context(), r)
			if err != nil {
				if opts.OnError != nil {
					return opts.OnError(c, err)
				}
				return echo.NewHTTPError(http.StatusInternalServerError).SetInternal(err)
			}
			ratelimit.SetFields(c.Response().Header(), v.Fields)
			if v.Decision != nil && len(v.Decision.Limits) > 0 {
				c.Set(ContextKey, v.Decision)
			}
			if v.Status != 0 {
				if v.Decision != nil && opts.Handler != nil {
					return opts.Handler(c, v.Decision)
				}
				return c.Blob(v.Status, ratelimit.JSONContentType, v.Body)
			}
			// Released when next returns, also by a panic: never when the client leaves.
			defer func() { gate.Done(r.Context(), v, status(c, err)) }()
			if !v.Pace(r.Context()) {
				return r.Context().Err()
			}
			return next(c)
		}
	}, nil
}

// status is the response's status: what was written, else what Echo's
// error handler will write for err.
func status(c echo.Context, err error) int {
	if err == nil || c.Response().Committed {
		return c.Response().Status
	}
	var httpError *echo.HTTPError
	if errors.As(err, &httpError) {
		return httpError.Code
	}
	return http.StatusInternalServerError
}
