// Package metrics defines every Prometheus metric hongbao exports: their
// names, help, labels and buckets, and the small structs of pre-resolved
// collectors the instrumented packages take through their constructors.
// Each process makes one registry (NewRegistry) and passes it explicitly;
// there is no global registry and no package-level state.
//
// The structs' methods are safe on a nil receiver (they do nothing), so
// a package used without metrics (tests, benchmarks, embedding) needs no
// stubs. Labels only ever take values from small fixed sets (route
// patterns, status codes, outcomes, SET names): never a packet or user ID.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// NewRegistry returns a registry with the Go runtime and process
// collectors on.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// latencyBuckets are for request and transaction times, in seconds: from
// half a millisecond (a memo answer) to ten seconds (a stuck transaction).
func latencyBuckets() []float64 {
	return []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
}

// countBuckets are for sizes counted in items (opens in a batch, packets
// in a transaction): powers of two up to 1024.
func countBuckets() []float64 { return prometheus.ExponentialBuckets(1, 2, 11) }

// Ready reports readiness as a gauge (1 ready, 0 not) for alerting on a
// process that lost it.
func Ready(reg prometheus.Registerer, ready func() bool) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hongbao_ready", Help: "1 when the process's readiness check passes (what /readyz on its admin listener answers), else 0.",
	}, func() float64 { return b2f(ready()) }))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
