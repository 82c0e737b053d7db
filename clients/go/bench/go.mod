module github.com/redis-ratelimit/redis-ratelimit/clients/go/bench

go 1.22.0

require (
	github.com/go-chi/httprate v0.14.1
	github.com/go-chi/httprate-redis v0.5.4
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/redis-ratelimit/redis-ratelimit/clients/go v0.0.0
	github.com/redis/go-redis/v9 v9.18.0
	github.com/ulule/limiter/v3 v3.11.2
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/dunglas/httpsfv v1.1.2 // indirect
	github.com/go-logr/logr v1.4.2 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	go.opentelemetry.io/auto/sdk v1.1.0 // indirect
	go.opentelemetry.io/otel v1.35.0 // indirect
	go.opentelemetry.io/otel/metric v1.35.0 // indirect
	go.opentelemetry.io/otel/trace v1.35.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
)

replace github.com/redis-ratelimit/redis-ratelimit/clients/go => ../
