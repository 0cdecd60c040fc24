package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Queue measures the open queues' transactions: opens per packet batch,
// packets merged per transaction, the transactions' time, and the
// memcached CAS slot cap's refusals and fallbacks.
type Queue struct {
	batch, merged, seconds     prometheus.Observer
	refused, fallback, retried prometheus.Counter
}

// NewQueue registers the queue metrics.
func NewQueue(reg prometheus.Registerer) *Queue {
	batch := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hongbao_queue_batch_opens",
		Help: "Opens of one packet taken from its queue for one transaction.", Buckets: countBuckets()})
	merged := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hongbao_queue_tx_packets",
		Help: "Packets whose batches one open transaction carried (merged by a committer).", Buckets: countBuckets()})
	seconds := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hongbao_mysql_tx_duration_seconds",
		Help: "Time of one open transaction in MySQL, retries included.", Buckets: latencyBuckets()})
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "hongbao_cache_slot_refusals_total",
		Help: "Batches answered busy because the packet's memcached CAS slots were all taken."})
	fallback := prometheus.NewCounter(prometheus.CounterOpts{Name: "hongbao_cache_slot_fallbacks_total",
		Help: "Batches run under the worker's own serialisation because memcached could not be asked for a slot."})
	retried := prometheus.NewCounter(prometheus.CounterOpts{Name: "hongbao_queue_split_retries_total",
		Help: "Failed merged transactions or batches applied again packet by packet or open by open."})
	reg.MustRegister(batch, merged, seconds, refused, fallback, retried)
	return &Queue{batch: batch, merged: merged, seconds: seconds, refused: refused, fallback: fallback, retried: retried}
}

// Tx records one transaction of packets carrying opens, and its time.
func (q *Queue) Tx(packets int, took time.Duration) {
	if q == nil {
		return
	}
	q.merged.Observe(float64(packets))
	q.seconds.Observe(took.Seconds())
}

// Batch records the opens of one packet's batch.
func (q *Queue) Batch(opens int) {
	if q == nil {
		return
	}
	q.batch.Observe(float64(opens))
}

// SlotRefused counts a batch refused by the CAS slot cap.
func (q *Queue) SlotRefused() {
	if q != nil {
		q.refused.Inc()
	}
}

// SlotFallback counts a batch run without consulting the cap.
func (q *Queue) SlotFallback() {
	if q != nil {
		q.fallback.Inc()
	}
}

// Split counts a failed transaction applied again in parts.
func (q *Queue) Split() {
	if q != nil {
		q.retried.Inc()
	}
}
