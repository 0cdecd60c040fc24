package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Webhooks measures a settler's webhook deliverer: events every endpoint
// accepted, attempts that failed (retried with backoff) and events given
// up after a day of retries (kept as failed for hbctl webhook replay).
type Webhooks struct {
	delivered, attempts, gaveUp prometheus.Counter
}

// NewWebhooks registers the deliverer's counters.
func NewWebhooks(reg prometheus.Registerer) *Webhooks {
	w := &Webhooks{
		delivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "hongbao_webhook_delivered_total",
			Help: "Webhook events every endpoint accepted (2xx)."}),
		attempts: prometheus.NewCounter(prometheus.CounterOpts{Name: "hongbao_webhook_attempt_failures_total",
			Help: "Webhook delivery attempts that failed (an endpoint down, slow or not answering 2xx); retried with backoff."}),
		gaveUp: prometheus.NewCounter(prometheus.CounterOpts{Name: "hongbao_webhook_failed_total",
			Help: "Webhook events given up after their retry window, kept as failed (hbctl webhook replay)."}),
	}
	reg.MustRegister(w.delivered, w.attempts, w.gaveUp)
	return w
}

// Delivered counts events delivered.
func (w *Webhooks) Delivered(n int) {
	if w != nil {
		w.delivered.Add(float64(n))
	}
}

// AttemptFailed counts a failed attempt.
func (w *Webhooks) AttemptFailed() {
	if w != nil {
		w.attempts.Inc()
	}
}

// GaveUp counts an event kept as failed.
func (w *Webhooks) GaveUp() {
	if w != nil {
		w.gaveUp.Inc()
	}
}

// EventBacklog reads a SET's webhook events: pending, failed, and when the
// oldest pending one was written (zero when none).
type EventBacklog func(ctx context.Context) (pending, failed int, oldest time.Time, err error)

type events struct {
	pending, failed, age *prometheus.Desc
	read                 EventBacklog
	now                  func() time.Time
}

// RegisterEventBacklog registers hongbao_webhook_pending_events,
// hongbao_webhook_failed_events and hongbao_webhook_oldest_age_seconds of
// SET set, read with read at scrape time.
func RegisterEventBacklog(reg prometheus.Registerer, set string, read EventBacklog, now func() time.Time) {
	l := prometheus.Labels{"set": set}
	reg.MustRegister(&events{read: read, now: now,
		pending: prometheus.NewDesc("hongbao_webhook_pending_events", "Webhook events of the SET waiting for delivery.", nil, l),
		failed:  prometheus.NewDesc("hongbao_webhook_failed_events", "Webhook events of the SET given up after their retry window.", nil, l),
		age: prometheus.NewDesc("hongbao_webhook_oldest_age_seconds",
			"Age of the oldest pending webhook event (0 when none): how far deliveries lag.", nil, l)})
}

func (e *events) Describe(ch chan<- *prometheus.Desc) { ch <- e.pending; ch <- e.failed; ch <- e.age }

func (e *events) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	pending, failed, oldest, err := e.read(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(e.pending, err)
		return
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(e.now().Sub(oldest).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(e.pending, prometheus.GaugeValue, float64(pending))
	ch <- prometheus.MustNewConstMetric(e.failed, prometheus.GaugeValue, float64(failed))
	ch <- prometheus.MustNewConstMetric(e.age, prometheus.GaugeValue, age)
}
