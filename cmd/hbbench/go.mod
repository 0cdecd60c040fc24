module github.com/hongbao-dev/hongbao/cmd/hbbench

go 1.26.8

require (
	github.com/hongbao-dev/hongbao v0.0.0
	github.com/redis/go-redis/v9 v9.23.0
	go.uber.org/zap v1.28.0
	golang.org/x/image v0.47.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/bradfitz/gomemcache v0.0.0-20260422231931-4d751bb6e37c // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// The benchmark is built from the product in this tree; its rival designs
// (Redis) and plotting stay out of the product's module graph.
replace github.com/hongbao-dev/hongbao => ../..
