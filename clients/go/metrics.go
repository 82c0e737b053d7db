package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// What the limiter reports of each decision: OpenTelemetry metrics (a
// no-op without an SDK) and the app's own OnDecision hook.

// DecisionEvent is what OnDecision gets for each decision.
type DecisionEvent struct {
	Outcome Outcome
	// Decision is nil when Redis could not answer (unless limits were decided in process).
	Decision *Decision
	// Duration of the Redis call; 0 when none was made (answered in process,
	// or Redis waiting for its next try).
	Duration time.Duration
	// Err is why Redis could not answer, when it could not.
	Err error
}

// callResult is how a Redis call ended, for the duration histogram.
type callResult string

const (
	callOK      callResult = "ok"
	callError   callResult = "error"
	callTimeout callResult = "timeout"
)

var outcomes = []Outcome{OutcomeAllowed, OutcomeDenied, OutcomeDeniedInProcess, OutcomeUnavailableOpen,
	OutcomeUnavailableClosed, OutcomeUnavailableLocalAllowed, OutcomeUnavailableLocalDenied}

type metrics struct {
	decisions metric.Int64Counter
	duration  metric.Float64Histogram
	// The attribute sets, made once: policy and outcome, and each call
	// result (as option lists: a call then allocates nothing).
	byOutcome map[Outcome][]metric.AddOption
	byResult  map[callResult][]metric.RecordOption
	hook      func(DecisionEvent)
	logger    *slog.Logger
}

func newMetrics(provider metric.MeterProvider, names []string, hook func(DecisionEvent), logger *slog.Logger) (*metrics, error) {
	if provider == nil {
		provider = otel.GetMeterProvider()
	}
	meter := provider.Meter("redis-ratelimit-client")
	decisions, err := meter.Int64Counter("ratelimit.decisions", metric.WithDescription("Rate limit decisions by policy and outcome"))
	if err != nil {
		return nil, fmt.Errorf("ratelimit: metrics: %w", err)
	}
	duration, err := meter.Float64Histogram("ratelimit.redis.duration", metric.WithDescription("Duration of the Redis call of a decision"), metric.WithUnit("s"))
	if err != nil {
		return nil, fmt.Errorf("ratelimit: metrics: %w", err)
	}
	m := &metrics{decisions: decisions, duration: duration, hook: hook, logger: logger,
		byOutcome: map[Outcome][]metric.AddOption{}, byResult: map[callResult][]metric.RecordOption{}}
	policy := attribute.String("ratelimit.policy", strings.Join(names, ","))
	for _, o := range outcomes {
		m.byOutcome[o] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(policy, attribute.String("ratelimit.outcome", string(o))))}
	}
	for _, r := range []callResult{callOK, callError, callTimeout} {
		m.byResult[r] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("ratelimit.result", string(r))))}
	}
	return m, nil
}

// called records a Redis call's duration.
func (m *metrics) called(result callResult, took time.Duration) {
	m.duration.Record(context.Background(), took.Seconds(), m.byResult[result]...)
}

// decided counts a decision and hands it to the hook; a panic in the hook is logged.
func (m *metrics) decided(outcome Outcome, decision *Decision, took time.Duration, err error) {
	m.decisions.Add(context.Background(), 1, m.byOutcome[outcome]...)
	if m.hook == nil {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			m.logger.Error(fmt.Sprintf("rate limiter: OnDecision panicked: %v", p))
		}
	}()
	m.hook(DecisionEvent{Outcome: outcome, Decision: decision, Duration: took, Err: err})
}
