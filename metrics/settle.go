package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Settle measures a settler: entries delivered to the wallet, expired
// packets closed, pending sends swept and the time of its last good round.
type Settle struct {
	credits, refunds, other, closed, swept, failed prometheus.Counter
	lastRound, held                                prometheus.Gauge
}

// NewSettle registers the settler metrics.
func NewSettle(reg prometheus.Registerer) *Settle {
	delivered := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hongbao_settle_delivered_total",
		Help: "Outbox entries delivered to the wallet, by kind (credit: an open; refund: an expired packet's rest)."}, []string{"kind"})
	closed := prometheus.NewCounter(prometheus.CounterOpts{Name: "hongbao_settle_expired_closed_total",
		Help: "Expired packets closed (their rest written to the outbox as a refund)."})
	swept := prometheus.NewCounter(prometheus.CounterOpts{Name: "hongbao_settle_pending_swept_total",
		Help: "Pending sends a crash left undecided that the sweeper decided."})
	failed := prometheus.NewCounter(prometheus.CounterOpts{Name: "hongbao_settle_round_errors_total",
		Help: "Settler rounds that failed (retried after the settler's idle pause)."})
	last := prometheus.NewGauge(prometheus.GaugeOpts{Name: "hongbao_settle_last_round_timestamp_seconds",
		Help: "Unix time of the settler's last round that succeeded."})
	held := prometheus.NewGauge(prometheus.GaugeOpts{Name: "hongbao_settle_held_rows",
		Help: "Outbox rows the settler set aside as undeliverable (a ledger key recorded for another entry, an entry the wallet refuses); never expected, named by hbctl verify."})
	reg.MustRegister(delivered, closed, swept, failed, last, held)
	return &Settle{credits: delivered.WithLabelValues("credit"), refunds: delivered.WithLabelValues("refund"),
		other: delivered.WithLabelValues("other"), closed: closed, swept: swept, failed: failed, lastRound: last, held: held}
}

// Held sets the number of outbox rows the settler has set aside.
func (s *Settle) Held(n int) {
	if s != nil {
		s.held.Set(float64(n))
	}
}

// Delivered counts an entry delivered, by its ledger kind ("open",
// "refund", anything else).
func (s *Settle) Delivered(kind string) {
	if s == nil {
		return
	}
	switch kind {
	case "open":
		s.credits.Inc()
	case "refund":
		s.refunds.Inc()
	default:
		s.other.Inc()
	}
}

// Closed counts expired packets closed.
func (s *Settle) Closed(n int) {
	if s != nil {
		s.closed.Add(float64(n))
	}
}

// Swept counts pending sends decided.
func (s *Settle) Swept(n int) {
	if s != nil {
		s.swept.Add(float64(n))
	}
}

// Round records the end of a round and its error, if any.
func (s *Settle) Round(err error, now time.Time) {
	if s == nil {
		return
	}
	if err != nil {
		s.failed.Inc()
		return
	}
	s.lastRound.Set(float64(now.UnixNano()) / 1e9)
}

// Backlog reads a SET's outbox: the entries waiting and when the oldest
// was written (zero when none).
type Backlog func(ctx context.Context) (rows int, oldest time.Time, err error)

// outbox reports the outbox's backlog read at scrape time, so its lag is
// seen as it is whether or not a settler runs.
type outbox struct {
	rows, age *prometheus.Desc
	read      Backlog
	now       func() time.Time
}

// RegisterOutbox registers hongbao_outbox_rows and
// hongbao_outbox_oldest_age_seconds of SET set, read with read at scrape
// time (a scrape that cannot read them reports neither).
func RegisterOutbox(reg prometheus.Registerer, set string, read Backlog, now func() time.Time) {
	l := prometheus.Labels{"set": set}
	reg.MustRegister(&outbox{read: read, now: now,
		rows: prometheus.NewDesc("hongbao_outbox_rows", "Entries in the SET's outbox waiting for delivery to the wallet.", nil, l),
		age: prometheus.NewDesc("hongbao_outbox_oldest_age_seconds",
			"Age of the oldest undelivered outbox entry (0 when empty): how far the settler lags.", nil, l)})
}

func (o *outbox) Describe(ch chan<- *prometheus.Desc) { ch <- o.rows; ch <- o.age }

func (o *outbox) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, oldest, err := o.read(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(o.rows, err)
		return
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(o.now().Sub(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(o.rows, prometheus.GaugeValue, float64(rows))
	ch <- prometheus.MustNewConstMetric(o.age, prometheus.GaugeValue, age)
}
