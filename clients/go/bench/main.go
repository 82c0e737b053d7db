// The driver of make bench-go (scripts/bench-go.sh): interleaved rounds of
// each limiter's app (app/) on each path, a load of its own over a fixed
// number of keep-alive connections, the app's CPU from /proc, Redis's from
// INFO CPU; medians, and ratios to ours, written between the
// `<!-- bench-go: start -->` and `<!-- bench-go: end -->` markers of the
// README.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

var variants = []string{"none", "ours", "ours-script", "redis_rate", "ulule", "httprate"}

var paths = []string{"admitted", "denied"}

// run is one measured run of one app.
type run struct {
	requests       int64
	rps            float64
	appUs, redisUs float64 // CPU microseconds a request
}

func main() {
	app := flag.String("app", "", "the app's binary")
	module := flag.String("module", "", "address of a Redis with the module")
	plain := flag.String("plain", "", "address of a Redis without it (ours-script)")
	rounds := flag.Int("rounds", 3, "interleaved rounds")
	seconds := flag.Float64("seconds", 3, "seconds a run")
	connections := flag.Int("connections", 16, "keep-alive connections of the load")
	readme := flag.String("readme", "", "README to write the table into (none: print it)")
	only := flag.String("variants", "", "comma-separated variants to run (a look at a few; the README table needs all)")
	flag.Parse()
	if *only != "" {
		variants = strings.Split(*only, ",")
	}
	redisOf := map[string]string{"ours-script": *plain}
	for _, v := range variants {
		if redisOf[v] == "" {
			redisOf[v] = *module
		}
	}
	duration := time.Duration(*seconds * float64(time.Second))
	runs := map[string][]run{}
	for round := 0; round < *rounds; round++ {
		order := append(variants[round%len(variants):len(variants):len(variants)], variants[:round%len(variants)]...)
		for _, path := range paths {
			for _, variant := range order {
				r, err := measure(*app, variant, path, redisOf[variant], *connections, duration)
				if err != nil {
					log.Fatalf("%s %s: %v", variant, path, err)
				}
				runs[variant+" "+path] = append(runs[variant+" "+path], r)
				log.Printf("round %d %s %s: %.0f req/s, app %.1f us, Redis %.1f us CPU a request", round+1, path, variant, r.rps, r.appUs, r.redisUs)
			}
		}
	}
	table := tableOf(runs, *rounds, *seconds, *connections)
	if *readme == "" {
		fmt.Println(table)
		return
	}
	if err := writeSection(*readme, "bench-go", table); err != nil {
		log.Fatal(err)
	}
}

// measure starts the app, loads it a second, then measures a run.
func measure(binary, variant, path, redisAddr string, connections int, duration time.Duration) (run, error) {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return run{}, err
	}
	cmd := exec.Command(binary, variant, path, redisAddr, "0") // a free port: the app says which
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return run{}, err
	}
	if err := cmd.Start(); err != nil {
		return run{}, err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ready := strings.CutPrefix(strings.TrimSpace(line), "ready ")
	if err != nil || !ready {
		return run{}, fmt.Errorf("the app did not start: %q %v", line, err)
	}
	if _, err := load(addr, connections, time.Second); err != nil { // warm-up (and the denied path's one admitted request)
		return run{}, err
	}
	appBefore, err := processCPU(cmd.Process.Pid)
	if err != nil {
		return run{}, err
	}
	redisBefore, err := redisCPU(ctx, rdb)
	if err != nil {
		return run{}, err
	}
	counts, err := load(addr, connections, duration)
	if err != nil {
		return run{}, err
	}
	appAfter, _ := processCPU(cmd.Process.Pid)
	redisAfter, _ := redisCPU(ctx, rdb)
	total := counts[200] + counts[429]
	want := 200
	if path == "denied" && variant != "none" {
		want = 429
	}
	if total == 0 || counts[want] < total*99/100 || counts[0] > 0 {
		return run{}, fmt.Errorf("%d of %d answers were %d (%v)", counts[want], total, want, counts)
	}
	return run{requests: total, rps: float64(total) / duration.Seconds(),
		appUs: (appAfter - appBefore) * 1e6 / float64(total), redisUs: (redisAfter - redisBefore) * 1e6 / float64(total)}, nil
}

// load sends GET / on each of connections keep-alive connections, one
// request at a time each, for d; the answers by status (0: other).
func load(addr string, connections int, d time.Duration) (map[int]int64, error) {
	deadline := time.Now().Add(d)
	counts := map[int]int64{}
	var mu sync.Mutex
	var failure error
	var wg sync.WaitGroup
	for i := 0; i < connections; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine, err := connection(addr, deadline)
			mu.Lock()
			defer mu.Unlock()
			for status, n := range mine {
				counts[status] += n
			}
			if err != nil && failure == nil {
				failure = err
			}
		}()
	}
	wg.Wait()
	return counts, failure
}

var request = []byte("GET / HTTP/1.1\r\nHost: bench\r\n\r\n")

// connection is one connection's requests until deadline: a plain
// HTTP/1.1 client that reads each response's status and Content-Length body.
func connection(addr string, deadline time.Time) (map[int]int64, error) {
	counts := map[int]int64{}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return counts, err
	}
	defer conn.Close()
	conn.SetDeadline(deadline.Add(5 * time.Second))
	reader := bufio.NewReaderSize(conn, 16384)
	for time.Now().Before(deadline) {
		if _, err := conn.Write(request); err != nil {
			return counts, err
		}
		status, length := 0, -1
		for i := 0; ; i++ {
			line, err := reader.ReadSlice('\n')
			if err != nil {
				return counts, err
			}
			if i == 0 {
				if len(line) < 12 {
					return counts, fmt.Errorf("status line %q", line)
				}
				status, _ = strconv.Atoi(string(line[9:12]))
				continue
			}
			if len(line) <= 2 {
				break
			}
			if name, value, ok := strings.Cut(string(line), ":"); ok && strings.EqualFold(name, "Content-Length") {
				length, _ = strconv.Atoi(strings.TrimSpace(value))
			}
		}
		if length < 0 {
			return counts, errors.New("a response without Content-Length")
		}
		if _, err := reader.Discard(length); err != nil {
			return counts, err
		}
		if status != 200 && status != 429 {
			status = 0
		}
		counts[status]++
	}
	return counts, nil
}

var tick = func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if n, _ := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && n > 0 {
		return float64(n)
	}
	return 100
}()

// processCPU is the process's user and system CPU seconds.
func processCPU(pid int) (float64, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	_, after, _ := strings.Cut(string(stat), ") ")
	fields := strings.Fields(after)
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / tick, nil
}

// redisCPU is the server's used_cpu_sys + used_cpu_user, in seconds.
func redisCPU(ctx context.Context, rdb *redis.Client) (float64, error) {
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, line := range strings.Split(info, "\r\n") {
		name, value, _ := strings.Cut(line, ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return 0, err
			}
			total += v
		}
	}
	return total, nil
}

func median(runs []run, field func(run) float64) float64 {
	if len(runs) == 0 { // a variant left out (-variants)
		return math.NaN()
	}
	values := make([]float64, len(runs))
	for i, r := range runs {
		values[i] = field(r)
	}
	sort.Float64s(values)
	return values[len(values)/2]
}

var names = map[string]string{"none": "no limiter", "ours": "ours, module", "ours-script": "ours, script mode",
	"redis_rate": "go-redis/redis_rate v10", "ulule": "ulule/limiter v3 (Redis store)", "httprate": "go-chi/httprate-redis"}

func tableOf(runs map[string][]run, rounds int, seconds float64, connections int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "net/http, one client address, %d connections, %d interleaved rounds of %g s, medians (`make bench-go`, %s, %s). ",
		connections, rounds, seconds, time.Now().UTC().Format("2006-01-02"), runtime.Version())
	b.WriteString("Ratios are ours / theirs, as requests/s, app CPU and Redis CPU a request: requests/s above 1 and CPU below 1 favour ours. ")
	b.WriteString("`denied`: every request after the first is refused (ours answers repeats from its denial cache; the others ask Redis each time).\n\n")
	b.WriteString("| path | limiter | requests/s | app CPU µs/request | Redis CPU µs/request | ours (module) / this | ours (script) / this |\n")
	b.WriteString("|---|---|---:|---:|---:|---|---|\n")
	rps := func(r run) float64 { return r.rps }
	app := func(r run) float64 { return r.appUs }
	redisCPU := func(r run) float64 { return r.redisUs }
	for _, path := range paths {
		for _, variant := range variants {
			rs := runs[variant+" "+path]
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.1f | %.1f |", path, names[variant], median(rs, rps), median(rs, app), median(rs, redisCPU))
			for _, ours := range []string{"ours", "ours-script"} {
				o := runs[ours+" "+path]
				if variant == "none" || variant == "ours" || variant == ours {
					b.WriteString(" |")
					continue
				}
				fmt.Fprintf(&b, " %.2f, %.2f, %s |", median(o, rps)/median(rs, rps), median(o, app)/median(rs, app), ratio(median(o, redisCPU), median(rs, redisCPU)))
			}
			b.WriteString("\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// ratio of two CPU figures; "-" when theirs is nothing (no Redis call).
func ratio(ours, theirs float64) string {
	if theirs <= 0 {
		return "-"
	}
	return strconv.FormatFloat(ours/theirs, 'f', 2, 64)
}

// writeSection puts text between readme's <!-- name: start --> and <!-- name: end --> markers.
func writeSection(readme, name, text string) error {
	data, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	s := string(data)
	start, end := "<!-- "+name+": start -->", "<!-- "+name+": end -->"
	i, j := strings.Index(s, start), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s lacks the %s and %s markers", readme, start, end)
	}
	return os.WriteFile(readme, []byte(s[:i+len(start)]+"\n"+text+"\n"+s[j:]), 0o644)
}
