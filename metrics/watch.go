package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Watch measures the failover watchdog (hbwatch): which groups are armed,
// each group's last probe of its primary (when, and whether it answered)
// and its automatic failovers by outcome. The group label is a SET's name
// or "core".
type Watch struct {
	armed, probeTime, probeOK *prometheus.GaugeVec
	failovers                 *prometheus.CounterVec
}

// NewWatch registers the watchdog metrics.
func NewWatch(reg prometheus.Registerer) *Watch {
	w := &Watch{
		armed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hongbao_watch_armed",
			Help: "1 when the group is armed (every replica seen replicating from its primary, the primary seen safe): an automatic failover may run."}, []string{"group"}),
		probeTime: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hongbao_watch_last_probe_timestamp_seconds",
			Help: "Unix time of the watchdog's last probe of the group's primary."}, []string{"group"}),
		probeOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hongbao_watch_last_probe_ok",
			Help: "1 when the group's primary answered the last probe, else 0."}, []string{"group"}),
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hongbao_watch_failovers_total",
			Help: "Automatic failovers by group and outcome (done, failed, refused: the lock was held or the group changed)."}, []string{"group", "outcome"}),
	}
	reg.MustRegister(w.armed, w.probeTime, w.probeOK, w.failovers)
	return w
}

// Armed records whether group is armed.
func (w *Watch) Armed(group string, armed bool) {
	if w != nil {
		w.armed.WithLabelValues(group).Set(b2f(armed))
	}
}

// Probed records a probe of group's primary at at: ok when it answered.
func (w *Watch) Probed(group string, ok bool, at time.Time) {
	if w != nil {
		w.probeTime.WithLabelValues(group).Set(float64(at.UnixNano()) / 1e9)
		w.probeOK.WithLabelValues(group).Set(b2f(ok))
	}
}

// Failover counts an automatic failover of group by outcome.
func (w *Watch) Failover(group, outcome string) {
	if w != nil {
		w.failovers.WithLabelValues(group, outcome).Inc()
	}
}
