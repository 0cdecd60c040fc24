package metrics

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of an open, the values of hongbao_opens_total's outcome label.
const (
	OutcomeOpened   = "opened"
	OutcomeAlready  = "already_opened"
	OutcomeSoldOut  = "sold_out"
	OutcomeExpired  = "expired"
	OutcomeBusy     = "busy"
	OutcomeRejected = "rejected" // not found, wrong SET, bad input
	OutcomeError    = "error"    // a server fault
)

// Opens counts a SET server's opens by outcome.
type Opens struct {
	opened, already, soldOut, expired, busy, rejected, failed prometheus.Counter
}

// NewOpens registers the open counters, every outcome at zero.
func NewOpens(reg prometheus.Registerer) *Opens {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hongbao_opens_total", Help: "Opens answered by a SET server, by outcome (opened, already_opened, sold_out, expired, busy, rejected, error).",
	}, []string{"outcome"})
	reg.MustRegister(v)
	return &Opens{opened: v.WithLabelValues(OutcomeOpened), already: v.WithLabelValues(OutcomeAlready),
		soldOut: v.WithLabelValues(OutcomeSoldOut), expired: v.WithLabelValues(OutcomeExpired),
		busy: v.WithLabelValues(OutcomeBusy), rejected: v.WithLabelValues(OutcomeRejected), failed: v.WithLabelValues(OutcomeError)}
}

// Count records one open's outcome (one of the Outcome constants).
func (o *Opens) Count(outcome string) {
	if o == nil {
		return
	}
	var c prometheus.Counter
	switch outcome {
	case OutcomeOpened:
		c = o.opened
	case OutcomeAlready:
		c = o.already
	case OutcomeSoldOut:
		c = o.soldOut
	case OutcomeExpired:
		c = o.expired
	case OutcomeBusy:
		c = o.busy
	case OutcomeRejected:
		c = o.rejected
	default:
		c = o.failed
	}
	c.Inc()
}

// Gauge registers a gauge read at scrape time (queue depth, memo sizes):
// what is already counted by the code that owns it costs nothing more.
func Gauge(reg prometheus.Registerer, name, help string, read func() float64) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, read))
}

// Counter registers a counter read at scrape time from a total the code
// that owns it keeps.
func Counter(reg prometheus.Registerer, name, help string, read func() float64) {
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, read))
}
