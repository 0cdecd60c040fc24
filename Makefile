# hongbao: `make run` starts everything, `make test` tests everything.
.PHONY: run up down test test-short fuzz build deps bench bench-compare bench-e2e bench-rebalance chaos

run: ## start the dev cluster in the foreground; Ctrl-C stops it (HOSTS=1: each process on a host of its own)
	@HB_HOSTS=$(HOSTS) scripts/dev.sh run

up: ## start the dev cluster in the background (HOSTS=1: each process on a network namespace of its own)
	@HB_HOSTS=$(HOSTS) scripts/dev.sh up

down: ## stop the dev cluster, hosts and etcd included
	@scripts/dev.sh down

test: ## vet + unit and integration tests with -race against real MariaDB and memcached
	@scripts/dev.sh test

test-short: ## the tests that need no database, cluster or browser (go test -short; the others skip): under a minute
	go test -short -count=1 ./...

fuzz: ## run every go test fuzz target for FUZZTIME each (default 20s); make test runs their seeds
	@scripts/dev.sh fuzz $(or $(FUZZTIME),20s)

deps: ## install MariaDB, memcached and Prometheus (promtool) if missing
	@scripts/dev.sh deps

build: ## the binaries, into .run/bin
	go build -o .run/bin/ ./cmd/...
	cd cmd/hbbench && go build -o ../../.run/bin/ .

bench-compare: ## the design comparison, end to end and memory; writes docs/bench/results.md
	@scripts/dev.sh bench

bench-e2e: ## only the end-to-end part: wrk through the router vs bare HTTP ceilings; writes docs/bench/results-e2e.md
	@scripts/dev.sh bench-e2e

bench-rebalance: ## a third of a loaded fleet's buckets onto a new SET and back: freezes, copy rate (BENCHMARKS.md)
	@unshare -n bash -c 'ip link set lo up; eval "$$(scripts/dev.sh test-env)"; HB_TEST_MARIADB_BUFFER_POOL=$${HB_TEST_MARIADB_BUFFER_POOL:-256M} go test -run "^$$" -bench BenchmarkRebalance -benchtime 1x -timeout 40m -v ./e2e/rebalance $(if $(BENCHFLAGS),-args $(BENCHFLAGS))'

chaos: ## the chaos run (cmd/hbchaos, a few minutes): 2,000 clients, kill -9 of every kind of process, checks; writes RELIABILITY.md (HOSTS=1: on hosts, with the network faults)
	@HB_HOSTS=$(HOSTS) scripts/dev.sh chaos -markdown RELIABILITY.md $(CHAOSFLAGS)

bench: ## go test micro-benchmarks of the hot functions
	go test -run '^$$' -bench . -benchmem . ./api ./queue ./router ./metrics
