package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Topology is what a process follows of the topology: the version it has,
// the buckets it saw move and when it last reached the meta database.
type Topology struct {
	Version     func() int64     // the version in use
	Moves       func() int64     // buckets seen changing SET since start
	LastRefresh func() time.Time // last successful poll of the meta DB
}

// RegisterTopology registers the topology gauges, read at scrape time.
func RegisterTopology(reg prometheus.Registerer, t Topology) {
	Gauge(reg, "hongbao_topology_version", "Version of the bucket -> SET map this process uses.",
		func() float64 { return float64(t.Version()) })
	Counter(reg, "hongbao_topology_bucket_moves_total", "Buckets this process saw move to another SET (topology changes since start).",
		func() float64 { return float64(t.Moves()) })
	Gauge(reg, "hongbao_topology_last_refresh_timestamp_seconds", "Unix time this process last read the topology version from the meta database.",
		func() float64 { return float64(t.LastRefresh().UnixNano()) / 1e9 })
}

// healthyServers reports the router's healthy servers per SET at scrape
// time (SET names are configuration: a bounded label).
type healthyServers struct {
	desc  *prometheus.Desc
	count func() map[string]int
}

// RegisterHealthyServers registers hongbao_router_healthy_servers{set},
// read from count at scrape time.
func RegisterHealthyServers(reg prometheus.Registerer, count func() map[string]int) {
	reg.MustRegister(&healthyServers{count: count, desc: prometheus.NewDesc("hongbao_router_healthy_servers",
		"SET servers the router believes healthy (answering /readyz), per SET.", []string{"set"}, nil)})
}

func (h *healthyServers) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

func (h *healthyServers) Collect(ch chan<- prometheus.Metric) {
	for set, n := range h.count() {
		ch <- prometheus.MustNewConstMetric(h.desc, prometheus.GaugeValue, float64(n), set)
	}
}
