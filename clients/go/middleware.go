package ratelimit

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// MiddlewareOptions configure the net/http middleware.
type MiddlewareOptions struct {
	HTTPOptions
	// Skip, when it returns true, lets a request through unchecked, without headers.
	Skip func(*http.Request) bool
	// Handler replaces the 429 answer (the rate-limit fields are set already).
	Handler func(w http.ResponseWriter, r *http.Request, d *Decision)
	// OnError answers a server error (an error reply from Redis, a key
	// function's error); 500 Internal Server Error when nil.
	OnError func(w http.ResponseWriter, r *http.Request, err error)
}

type decisionKey struct{}

// FromContext is the decision the middleware made for the request whose
// context this is; nil when there is none (skipped, or Redis unavailable
// with every limit Open).
func FromContext(ctx context.Context) *Decision {
	d, _ := ctx.Value(decisionKey{}).(*Decision)
	return d
}

// Middleware is net/http middleware over l: the rate-limit fields on every
// response, a 429 with the JSON body on a denial, 503 while Redis cannot
// answer and a limit is Closed, the decision in the request's context
// (FromContext). A concurrency limit's slot is held until the handler's
// ServeHTTP returns, whatever the client does. It fits chi's and
// gorilla/mux's Use as it is.
func Middleware(l *Limiter[*http.Request], opts MiddlewareOptions) (func(http.Handler) http.Handler, error) {
	gate, err := NewGate(l, opts.HTTPOptions)
	if err != nil {
		return nil, err
	}
	track := opts.SkipFailedRequests || opts.SkipSuccessfulRequests
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if opts.Skip != nil && opts.Skip(r) {
				next.ServeHTTP(w, r)
				return
			}
			v, err := gate.Decide(r.Context(), r)
			if err != nil {
				if opts.OnError != nil {
					opts.OnError(w, r, err)
				} else {
					l.logger.Error("rate limiter: " + err.Error())
					http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
				}
				return
			}
			SetFields(w.Header(), v.Fields)
			if v.Status != 0 {
				if v.Decision != nil && opts.Handler != nil {
					opts.Handler(w, r.WithContext(context.WithValue(r.Context(), decisionKey{}, v.Decision)), v.Decision)
					return
				}
				writeJSON(w, v.Status, v.Body)
				return
			}
			if v.Decision != nil && len(v.Decision.Limits) > 0 {
				r = r.WithContext(context.WithValue(r.Context(), decisionKey{}, v.Decision))
			}
			var status *statusWriter
			if track {
				status = &statusWriter{ResponseWriter: w}
				w = status
			}
			// Released when ServeHTTP returns, also by a panic: never when the client leaves.
			defer func() { gate.Done(r.Context(), v, status.code()) }()
			if v.Delay > 0 && !sleep(r.Context(), v.Delay) {
				return
			}
			next.ServeHTTP(w, r)
		})
	}, nil
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", JSONContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// sleep waits d unless ctx ends first (then false).
func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// statusWriter remembers the status a handler wrote (200 unless it said otherwise).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer's Flush, Hijack and deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// code is the status written; 200 when not tracked (nil: the options do not need it).
func (w *statusWriter) code() int {
	if w == nil || w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
