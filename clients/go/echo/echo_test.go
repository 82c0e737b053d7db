package echo_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"go.uber.org/goleak"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	rlecho "github.com/redis-ratelimit/redis-ratelimit/clients/go/echo"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/adaptertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestEcho(t *testing.T) {
	adaptertest.Run(t, adaptertest.Adapter[*http.Request]{
		Key: ratelimit.ByIP(ratelimit.IPOptions{}),
		Serve: func(t *testing.T, l *ratelimit.Limiter[*http.Request], s adaptertest.Setup, app *adaptertest.App) string {
			opts := rlecho.Options{HTTPOptions: s.HTTP}
			if s.Skip {
				opts.Skip = func(c echo.Context) bool { return c.Path() == "/healthz" }
			}
			if s.Custom {
				opts.Handler = func(c echo.Context, d *ratelimit.Decision) error {
					return c.String(http.StatusTeapot, "later, "+d.Limits[0].Name)
				}
			}
			if s.OnError {
				opts.OnError = func(c echo.Context, err error) error { return c.String(http.StatusUnauthorized, err.Error()) }
			}
			mw, err := rlecho.Middleware(l, opts)
			if err != nil {
				t.Fatal(err)
			}
			e := echo.New()
			e.Use(mw)
			ok := func(c echo.Context) error { return c.String(http.StatusOK, "ok") }
			e.GET("/", ok)
			e.GET("/healthz", ok)
			// A failed request as an error returned, for Echo's error handler to answer.
			e.GET("/fail", func(c echo.Context) error { return echo.NewHTTPError(http.StatusBadGateway, "no") })
			e.GET("/decision", func(c echo.Context) error {
				return c.String(http.StatusOK, adaptertest.Decision(rlecho.FromContext(c)))
			})
			e.GET("/slow", func(c echo.Context) error { app.Slow(); return ok(c) })
			server := httptest.NewServer(e)
			t.Cleanup(server.Close)
			return server.URL
		},
	})
}
