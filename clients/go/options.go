package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// Algorithm names a limit's algorithm as the module's limit specs do.
type Algorithm string

// The module's five rate algorithms and its concurrency limit.
const (
	TokenBucket   Algorithm = "tokenbucket"
	LeakyBucket   Algorithm = "leakybucket"
	FixedWindow   Algorithm = "fixedwindow"
	SlidingWindow Algorithm = "slidingwindow"
	SlidingLog    Algorithm = "slidinglog"
	Concurrency   Algorithm = "concurrency"
)

// QuotaUnit is the draft's `qu`: what a limit counts.
type QuotaUnit string

// The quota units of draft-ietf-httpapi-ratelimit-headers.
const (
	Requests           QuotaUnit = "requests"
	ContentBytes       QuotaUnit = "content-bytes"
	ConcurrentRequests QuotaUnit = "concurrent-requests"
)

// OnUnavailable says what a limit does while Redis cannot answer.
type OnUnavailable string

// The three policies of "When Redis cannot answer" (docs/clients.md).
const (
	// Open lets the request through, unchecked by this limit.
	Open OnUnavailable = "open"
	// Closed refuses the request: Check returns an error that is ErrUnavailable (HTTP 503).
	Closed OnUnavailable = "closed"
	// Local decides in process, each limit divided by Options.Instances.
	Local OnUnavailable = "local"
)

// Mode picks the module's commands or the Lua library.
type Mode string

const (
	// Auto uses the module where a node has it (COMMAND INFO RL.MULTI), else the Lua library.
	Auto Mode = "auto"
	// Module uses the module's commands; without the module a check fails with a ModeError.
	Module Mode = "module"
	// Script uses the Lua library lua/ratelimit.lua, on any Redis or Valkey.
	Script Mode = "script"
)

// ScriptCall picks how script mode calls the Lua library.
type ScriptCall string

const (
	// ScriptAuto calls it as a Redis Function (FCALL) where a node allows it, else with EVALSHA.
	ScriptAuto ScriptCall = "auto"
	// ScriptFCall calls Functions only: a refusal is an error.
	ScriptFCall ScriptCall = "fcall"
	// ScriptEvalSHA never uses Functions.
	ScriptEvalSHA ScriptCall = "evalsha"
)

// NoDenialCache, as Options.DenialCache, turns the denial cache off (0 is the default size).
const NoDenialCache = -1

// MaxInteger is the largest limit, cost and count: 2^53-1, exact in every client language.
const MaxInteger = 1<<53 - 1

// KeyFunc gives a request's partition key: whom it counts against.
type KeyFunc[R any] func(ctx context.Context, req R) (string, error)

// IntFunc gives a per-request number (a quota per plan, a cost per request).
type IntFunc[R any] func(ctx context.Context, req R) (int64, error)

// Limit is one limit of a limiter. Zero fields take their defaults.
type Limit[R any] struct {
	// Algorithm is TokenBucket when left empty.
	Algorithm Algorithm
	// Limit is the bucket's capacity, the window's limit or the slots held at once: 1 to 2^53-1.
	Limit int64
	// LimitFunc gives the limit per request instead (a quota per plan); not with Limit.
	LimitFunc IntFunc[R]
	// Rate is a bucket's refill (token bucket) or drain (leaky bucket) in units per second.
	Rate float64
	// Window is a window algorithm's window in seconds (0.001 and up).
	Window float64
	// Lease is how many seconds a concurrency slot stays held unless released (0.001 and up).
	Lease float64
	// Cost is the units a request takes (slots, for concurrency): 1 when left 0.
	// A cost of 0 (a look) comes from a CostFunc.
	Cost int64
	// CostFunc gives the cost per request instead; not with Cost.
	CostFunc IntFunc[R]
	// Key gives the partition key; the limiter's Key when nil.
	Key KeyFunc[R]
	// Name is the policy name in the headers and the Redis key: printable ASCII,
	// 1 to 64 characters. Required when the limiter has more than one limit.
	Name string
	// QuotaUnit is the headers' qu; requests when empty (concurrent-requests for concurrency).
	QuotaUnit QuotaUnit
	// OnUnavailable is this limit's policy while Redis cannot answer: the
	// limiter's when empty, but Local for a concurrency limit.
	OnUnavailable OnUnavailable
	// RetryAfter is a concurrency denial's suggested wait in seconds: 1 when left 0.
	RetryAfter float64
}

// Options configure a Limiter. Zero fields take their defaults; New checks every one.
type Options[R any] struct {
	// Limits are checked together, all or nothing, in one call per request:
	// the limit's own command when there is one, RL.MULTI for several.
	Limits []Limit[R]
	// Key gives the partition key of limits without their own. Default for
	// *http.Request: ByIP(IPOptions{}); required for other request types.
	Key KeyFunc[R]
	// Prefix of the Redis keys, "ratelimit:" when empty; no { or }.
	Prefix string
	// Timeout is how long a check waits for Redis (a context deadline that
	// comes sooner wins): 1 s when 0.
	Timeout time.Duration
	// OnUnavailable is the limits' policy while Redis cannot answer: Open when empty.
	OnUnavailable OnUnavailable
	// Instances is how many processes share the limits, for Local: each takes
	// limit / Instances. 1 when 0.
	Instances int
	// Mode is Auto when empty.
	Mode Mode
	// ScriptCall is ScriptAuto when empty.
	ScriptCall ScriptCall
	// DenialCache is the most denials answered in process (least recently used
	// out): 10000 when 0; NoDenialCache turns it off.
	DenialCache int
	// OnDecision is called with every decision's outcome; a panic in it is logged.
	OnDecision func(DecisionEvent)
	// Logger gets the lines about an unavailable Redis; slog.Default() when nil.
	Logger *slog.Logger
	// MeterProvider makes the metrics; the global otel provider when nil (a no-op without an SDK).
	MeterProvider metric.MeterProvider
}

// ConfigError is a bad option: Option is its path (limits[0].rate).
type ConfigError struct {
	Option  string
	Problem string
}

func (e *ConfigError) Error() string { return e.Option + ": " + e.Problem }

func configError(option, format string, args ...any) *ConfigError {
	return &ConfigError{Option: option, Problem: fmt.Sprintf(format, args...)}
}

// policy is what a checked limit is, whatever the request: the words the
// module takes, made once, and how it is named and reported.
type policy struct {
	algorithm     Algorithm
	command       string // the algorithm as a limit spec word (TOKENBUCKET)
	own           string // the limit's own command (RL.TOKENBUCKET; RL.ACQUIRE for a concurrency limit)
	param         float64
	paramText     string // param as the module takes it
	sizeText      string // the limit as the module takes it; "" when a LimitFunc gives it
	name          string
	named         bool
	quotaUnit     QuotaUnit // "" for requests
	onUnavailable OnUnavailable
	retryAfterMs  int64 // concurrency's hint
}

func (p *policy) isBucket() bool { return isBucket(p.algorithm) }

// limitSpec is a Limit after checking: defaults filled in, functions kept.
type limitSpec[R any] struct {
	policy
	size     int64 // 0 when sizeFunc gives it
	sizeFunc IntFunc[R]
	cost     int64
	costFunc IntFunc[R]
	key      KeyFunc[R]
}

func isBucket(a Algorithm) bool { return a == TokenBucket || a == LeakyBucket }

// paramOf: each algorithm's second parameter, what it means, and its least value.
var paramOf = map[Algorithm]struct {
	option, meaning string
	min             float64
}{
	TokenBucket:   {"rate", "units per second", 0.000001},
	LeakyBucket:   {"rate", "units per second", 0.000001},
	FixedWindow:   {"window", "seconds", 0.001},
	SlidingWindow: {"window", "seconds", 0.001},
	SlidingLog:    {"window", "seconds", 0.001},
	Concurrency:   {"lease", "seconds a slot is held unless released", 0.001},
}

// decimal is a number as the module takes it: at most six decimals, no
// exponent, the float's exact value rounded half up at the seventh decimal,
// as the module rounds the text it gets (and as Node's toFixed does): 1/128
// is 0.007813 in every client, so their keys and rates agree. (FormatFloat
// rounds a tie to even: 0.007812.)
func decimal(v float64) string {
	micros := new(big.Rat).SetFloat64(v) // exact; v is finite and positive here
	micros.Mul(micros, big.NewRat(1_000_000, 1))
	micros.Add(micros, big.NewRat(1, 2))
	whole := new(big.Int).Quo(micros.Num(), micros.Denom()) // floor: both positive
	text := whole.String()
	if len(text) < 7 {
		text = strings.Repeat("0", 7-len(text)) + text
	}
	text = text[:len(text)-6] + "." + text[len(text)-6:]
	text = strings.TrimRight(text, "0")
	return strings.TrimSuffix(text, ".")
}

func checkInteger(option string, v, min int64) error {
	if v < min || v > MaxInteger {
		return configError(option, "must be an integer from %d to %d (got %d)", min, int64(MaxInteger), v)
	}
	return nil
}

func checkNumber(option string, v, min, max float64) error {
	if math.IsNaN(v) || v < min || v > max {
		return configError(option, "must be a number from %s to %s (got %s)", strconv.FormatFloat(min, 'g', -1, 64), strconv.FormatFloat(max, 'g', -1, 64), strconv.FormatFloat(v, 'g', -1, 64))
	}
	return nil
}

// checkName: printable ASCII, so the name serializes as a Structured Field String.
func checkName(option, name string) error {
	if len(name) == 0 || len(name) > 64 {
		return configError(option, "must be 1 to 64 characters (got %q)", name)
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x20 || name[i] > 0x7e {
			return configError(option, "must be printable ASCII, no control characters (got %q)", name)
		}
	}
	return nil
}

func checkPolicy(option string, p OnUnavailable) error {
	switch p {
	case Open, Closed, Local:
		return nil
	}
	return configError(option, "must be %q, %q or %q (got %q)", Open, Closed, Local, p)
}

func checkLimit[R any](option string, l Limit[R], lone bool, fallback OnUnavailable) (*limitSpec[R], error) {
	algorithm := l.Algorithm
	if algorithm == "" {
		algorithm = TokenBucket
	}
	p, ok := paramOf[algorithm]
	if !ok {
		return nil, configError(option+".algorithm", "must be one of tokenbucket, leakybucket, fixedwindow, slidingwindow, slidinglog, concurrency (got %q)", algorithm)
	}
	command := strings.ToUpper(string(algorithm))
	own := "RL." + command
	if algorithm == Concurrency {
		own = "RL.ACQUIRE"
	}
	s := &limitSpec[R]{policy: policy{algorithm: algorithm, command: command, own: own, name: l.Name, named: l.Name != ""}, key: l.Key}
	switch {
	case l.LimitFunc != nil && l.Limit != 0:
		return nil, configError(option+".limit", "give limit or limitFunc, not both")
	case l.LimitFunc != nil:
		s.sizeFunc = l.LimitFunc
	default:
		if err := checkInteger(option+".limit", l.Limit, 1); err != nil {
			return nil, err
		}
		s.size = l.Limit
		s.sizeText = strconv.FormatInt(l.Limit, 10)
	}
	given := map[string]float64{"rate": l.Rate, "window": l.Window, "lease": l.Lease}
	for _, other := range []string{"rate", "window", "lease"} {
		if other != p.option && given[other] != 0 {
			return nil, configError(option+"."+other, "%s takes a %s (%s), not a %s", algorithm, p.option, p.meaning, other)
		}
	}
	if given[p.option] == 0 {
		return nil, configError(option+"."+p.option, "required for %s (%s)", algorithm, p.meaning)
	}
	s.param = given[p.option]
	if err := checkNumber(option+"."+p.option, s.param, p.min, 1e12); err != nil {
		return nil, err
	}
	s.paramText = decimal(s.param)
	if s.isBucket() && s.sizeFunc == nil && float64(s.size)/s.param > 1e12 {
		return nil, configError(option+".rate", "limit / rate must be at most 1e12 seconds")
	}
	switch {
	case l.CostFunc != nil && l.Cost != 0:
		return nil, configError(option+".cost", "give cost or costFunc, not both")
	case l.CostFunc != nil:
		s.costFunc = l.CostFunc
	case l.Cost == 0:
		s.cost = 1
	default:
		if err := checkInteger(option+".cost", l.Cost, 1); err != nil {
			return nil, err
		}
		s.cost = l.Cost
	}
	if !s.named {
		if !lone {
			return nil, configError(option+".name", "required when a request carries more than one limit")
		}
		s.name = "default"
	} else if err := checkName(option+".name", l.Name); err != nil {
		return nil, err
	}
	switch l.QuotaUnit {
	case "", Requests, ContentBytes, ConcurrentRequests:
	default:
		return nil, configError(option+".quotaUnit", "must be one of requests, content-bytes, concurrent-requests (got %q)", l.QuotaUnit)
	}
	if algorithm == Concurrency {
		if l.QuotaUnit != "" && l.QuotaUnit != ConcurrentRequests {
			return nil, configError(option+".quotaUnit", "a concurrency limit counts concurrent-requests")
		}
		s.quotaUnit = ConcurrentRequests
	} else if l.QuotaUnit != Requests {
		s.quotaUnit = l.QuotaUnit
	}
	s.onUnavailable = l.OnUnavailable
	switch {
	case s.onUnavailable != "":
		if err := checkPolicy(option+".onUnavailable", s.onUnavailable); err != nil {
			return nil, err
		}
	case algorithm == Concurrency:
		s.onUnavailable = Local
	default:
		s.onUnavailable = fallback
	}
	if l.RetryAfter != 0 && algorithm != Concurrency {
		return nil, configError(option+".retryAfter", "only a concurrency limit takes a retryAfter (its denials' suggested wait)")
	}
	if algorithm == Concurrency {
		retryAfter := l.RetryAfter
		if retryAfter == 0 {
			retryAfter = 1
		}
		if err := checkNumber(option+".retryAfter", retryAfter, 0.001, 1e12); err != nil {
			return nil, err
		}
		s.retryAfterMs = int64(math.Ceil(retryAfter * 1000))
	}
	return s, nil
}

// settings are Options after checking.
type settings[R any] struct {
	limits      []*limitSpec[R]
	key         KeyFunc[R]
	prefix      string
	timeout     time.Duration
	instances   int64
	mode        Mode
	scriptCall  ScriptCall
	denialCache int
	onDecision  func(DecisionEvent)
	logger      *slog.Logger
	meters      metric.MeterProvider
}

// check checks every option, naming the first bad one.
func (o *Options[R]) check() (*settings[R], error) {
	policy := o.OnUnavailable
	if policy == "" {
		policy = Open
	} else if err := checkPolicy("onUnavailable", policy); err != nil {
		return nil, err
	}
	if len(o.Limits) == 0 {
		return nil, configError("limits", "needs at least one limit, e.g. {Limit: 60, Rate: 1}")
	}
	s := &settings[R]{key: o.Key, prefix: o.Prefix, timeout: o.Timeout, mode: o.Mode, scriptCall: o.ScriptCall,
		onDecision: o.OnDecision, logger: o.Logger, meters: o.MeterProvider}
	seen := map[string]bool{}
	for i, l := range o.Limits {
		option := fmt.Sprintf("limits[%d]", i)
		spec, err := checkLimit(option, l, len(o.Limits) == 1, policy)
		if err != nil {
			return nil, err
		}
		if seen[spec.name] {
			return nil, configError(option+".name", "duplicate policy name %q", spec.name)
		}
		seen[spec.name] = true
		s.limits = append(s.limits, spec)
	}
	if s.key == nil {
		s.key = defaultKey[R]()
		for i, l := range s.limits {
			if l.key == nil && s.key == nil {
				return nil, configError(fmt.Sprintf("limits[%d].key", i), "required: no limiter Key is given, and only *http.Request has a default (ByIP)")
			}
		}
	}
	if s.prefix == "" {
		s.prefix = "ratelimit:"
	} else if strings.ContainsAny(s.prefix, "{}") {
		return nil, configError("prefix", "must not contain { or } (the key adds its own hash tag; got %q)", s.prefix)
	}
	switch {
	case s.timeout == 0:
		s.timeout = time.Second
	case s.timeout < 0:
		return nil, configError("timeout", "must be a positive duration (got %s)", s.timeout)
	}
	switch {
	case o.Instances == 0:
		s.instances = 1
	case o.Instances < 0:
		return nil, configError("instances", "must be an integer >= 1 (got %d)", o.Instances)
	default:
		s.instances = int64(o.Instances)
	}
	switch s.mode {
	case "":
		s.mode = Auto
	case Auto, Module, Script:
	default:
		return nil, configError("mode", "must be %q, %q or %q (got %q)", Auto, Module, Script, s.mode)
	}
	switch s.scriptCall {
	case "":
		s.scriptCall = ScriptAuto
	case ScriptAuto, ScriptFCall, ScriptEvalSHA:
	default:
		return nil, configError("scriptCall", "must be %q, %q or %q (got %q)", ScriptAuto, ScriptFCall, ScriptEvalSHA, s.scriptCall)
	}
	if s.scriptCall != ScriptAuto && s.mode == Module {
		return nil, configError("scriptCall", "mode %q calls no script: leave scriptCall empty", Module)
	}
	switch {
	case o.DenialCache == 0:
		s.denialCache = 10000
	case o.DenialCache == NoDenialCache:
		s.denialCache = 0
	case o.DenialCache < 0:
		return nil, configError("denialCache", "must be the most entries kept (>= 1), 0 for the default 10000, or NoDenialCache (got %d)", o.DenialCache)
	default:
		s.denialCache = o.DenialCache
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	return s, nil
}
