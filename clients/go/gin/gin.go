// Package gin is the limiter as gin middleware: the rate-limit fields on
// every response, a 429 with the JSON body of docs/clients.md on a
// denial, 503 while Redis cannot answer and a limit is Closed, the
// decision among the context's values (FromContext), and a concurrency
// slot held until the rest of the chain returns, whatever the client does.
//
// The limiter is the net/http one (ratelimit.Limiter[*http.Request]): its
// default key is ratelimit.ByIP, which reads X-Forwarded-For only as its
// TrustedProxies says (gin's own trusted-proxy setting, which c.ClientIP
// reads, trusts every proxy unless told otherwise).
package gin

import (
	"net/http"

	"github.com/gin-gonic/gin"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
)

// Options configure the middleware.
type Options struct {
	ratelimit.HTTPOptions
	// Skip, when it returns true, lets a request through unchecked, without headers.
	Skip func(*gin.Context) bool
	// Handler replaces the 429 answer (the rate-limit fields are set
	// already); the chain stops after it.
	Handler func(*gin.Context, *ratelimit.Decision)
	// OnError answers a server error (an error reply from Redis, a key
	// function's error); 500 Internal Server Error when nil. The chain stops after it.
	OnError func(*gin.Context, error)
}

// ContextKey is the key of the decision among the gin context's values.
const ContextKey = "ratelimit"

// FromContext is the decision the middleware made for c's request; nil when
// there is none (skipped, or Redis unavailable with every limit Open).
func FromContext(c *gin.Context) *ratelimit.Decision {
	d, _ := c.Value(ContextKey).(*ratelimit.Decision)
	return d
}

// Middleware is gin middleware over l.
func Middleware(l *ratelimit.Limiter[*http.Request], opts Options) (gin.HandlerFunc, error) {
	gate, err := ratelimit.NewGate(l, opts.HTTPOptions)
	if err != nil {
		return nil, err
	}
	return func(c *gin.Context) {
		if opts.Skip != nil && opts.Skip(c) {
			return
		}
		v, err := gate.Decide(c.Request.Context(), c.Request)
		if err != nil {
			if opts.OnError != nil {
				c.Abort()
				opts.OnError(c, err)
				return
			}
			l.Logger().Error("rate limiter: " + err.Error())
			c.AbortWithStatus(http.StatusInternalServerError)
			return
		}
		ratelimit.SetFields(c.Writer.Header(), v.Fields)
		if v.Decision != nil && len(v.Decision.Limits) > 0 {
			c.Set(ContextKey, v.Decision)
		}
		if v.Status != 0 {
			c.Abort()
			if v.Decision != nil && opts.Handler != nil {
				opts.Handler(c, v.Decision)
				return
			}
			c.Data(v.Status, ratelimit.JSONContentType, v.Body)
			return
		}
		// Released when the chain returns, also by a panic: never when the client leaves.
		defer func() { gate.Done(c.Request.Context(), v, c.Writer.Status()) }()
		if !v.Pace(c.Request.Context()) {
			c.Abort()
			return
		}
		c.Next()
	}, nil
}
