package ratelimit_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	ratelimit "github.com/redis-ratelimit/redis-ratelimit/clients/go"
	"github.com/redis-ratelimit/redis-ratelimit/clients/go/internal/servers"
)

// The instruments and attributes of docs/clients.md, and the hook.
func TestMetricsAndOnDecision(t *testing.T) {
	redis := servers.Start(t, servers.Options{})
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	var mu sync.Mutex
	var events []ratelimit.DecisionEvent
	log := &logs{}
	l := newLimiter(t, redis, ratelimit.Options[string]{MeterProvider: provider, Logger: log.logger(),
		OnDecision: func(e ratelimit.DecisionEvent) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
			if e.Outcome == ratelimit.OutcomeDeniedInProcess {
				panic("a broken hook")
			}
		},
		Limits: []ratelimit.Limit[string]{
			{Name: "burst", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: 3600},
			{Name: "daily", Algorithm: ratelimit.FixedWindow, Limit: 100, Window: 86400},
		}})
	check(t, l, "k") // allowed
	check(t, l, "k") // denied by Redis
	check(t, l, "k") // denied in process: the hook panics, the request does not
	check(t, l, "k")

	var data metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &data); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	var calls uint64
	for _, scope := range data.ScopeMetrics {
		if scope.Scope.Name != "redis-ratelimit-client" {
			continue
		}
		for _, m := range scope.Metrics {
			switch m.Name {
			case "ratelimit.decisions":
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					policy, _ := p.Attributes.Value(attribute.Key("ratelimit.policy"))
					outcome, _ := p.Attributes.Value(attribute.Key("ratelimit.outcome"))
					counts[policy.AsString()+" "+outcome.AsString()] = p.Value
				}
			case "ratelimit.redis.duration":
				if m.Unit != "s" {
					t.Fatalf("unit %q", m.Unit)
				}
				for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					if result, _ := p.Attributes.Value(attribute.Key("ratelimit.result")); result.AsString() == "ok" {
						calls = p.Count
					}
				}
			}
		}
	}
	want := map[string]int64{"burst,daily allowed": 1, "burst,daily denied": 1, "burst,daily denied_in_process": 2}
	if len(counts) != len(want) || calls != 2 {
		t.Fatalf("decisions %v, calls %d", counts, calls)
	}
	for k, v := range want {
		if counts[k] != v {
			t.Fatalf("decisions %v, want %v", counts, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 4 || events[0].Outcome != ratelimit.OutcomeAllowed || events[0].Duration <= 0 || events[0].Decision == nil ||
		events[2].Duration != 0 || events[1].Decision.Allowed {
		t.Fatalf("%+v", events)
	}
	if strings.Count(log.String(), "OnDecision panicked: a broken hook") != 2 {
		t.Fatal(log.String())
	}
}
