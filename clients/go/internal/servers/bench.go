package servers

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchHandler serves b.N requests (GET /, one at a time) with handler,
// each answered with status want, after one not counted (a denied path's
// admitted request), and reports the CPU they cost (CPUPerOp).
func BenchHandler(b *testing.B, s *Server, handler http.Handler, want int) {
	b.Helper()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	handler.ServeHTTP(httptest.NewRecorder(), req)
	b.ReportAllocs()
	b.ResetTimer()
	report := CPUPerOp(b, s)
	for i := 0; i < b.N; i++ {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, req)
		if w.Code != want {
			b.Fatalf("status %d", w.Code)
		}
	}
	b.StopTimer()
	report()
}

// CPUPerOp starts counting the CPU this process and s use; the function
// it returns, called once the benchmark's loop is done, reports both a
// b.N as app-cpu-ns/op and redis-cpu-ns/op. A sequential benchmark's
// ns/op is mostly the round trip's wait; these are what a request costs.
func CPUPerOp(b *testing.B, s *Server) func() {
	b.Helper()
	app, redis := processCPU(b), s.cpu()
	return func() {
		b.Helper()
		n := float64(b.N)
		b.ReportMetric(float64(processCPU(b)-app)/n, "app-cpu-ns/op")
		b.ReportMetric(float64(s.cpu()-redis)/n, "redis-cpu-ns/op")
	}
}

// processCPU is the user and system CPU this process has used.
func processCPU(b *testing.B) time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		b.Fatal(err)
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

// cpu is the server's used_cpu_sys + used_cpu_user (INFO CPU).
func (s *Server) cpu() time.Duration {
	s.t.Helper()
	total := 0.0
	for _, line := range strings.Split(s.Do("INFO", "cpu"), "\r\n") {
		name, value, _ := strings.Cut(line, ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			seconds, err := strconv.ParseFloat(value, 64)
			if err != nil {
				s.t.Fatalf("INFO CPU %s: %v", name, err)
			}
			total += seconds
		}
	}
	return time.Duration(total * float64(time.Second))
}
