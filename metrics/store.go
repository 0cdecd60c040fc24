package metrics

import "github.com/prometheus/client_golang/prometheus"

// Store counts what the open transactions retried and what the MySQL
// fence refused.
type Store struct {
	deadlock, stale, fence prometheus.Counter
}

// NewStore registers the transaction retry counters.
func NewStore(reg prometheus.Registerer) *Store {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hongbao_mysql_tx_retries_total",
		Help: "Open transactions run again: after a deadlock or lock wait timeout (deadlock), or because in-memory knowledge of a packet went stale (stale)."},
		[]string{"reason"})
	fence := prometheus.NewCounter(prometheus.CounterOpts{Name: "hongbao_mysql_fence_refusals_total",
		Help: "Open transactions refused by the SET's fence (its MySQL does not own the bucket: answered wrong_set)."})
	reg.MustRegister(v, fence)
	return &Store{deadlock: v.WithLabelValues("deadlock"), stale: v.WithLabelValues("stale"), fence: fence}
}

// Deadlock counts a transaction retried after a deadlock.
func (s *Store) Deadlock() {
	if s != nil {
		s.deadlock.Inc()
	}
}

// Stale counts a transaction run again without stale knowledge.
func (s *Store) Stale() {
	if s != nil {
		s.stale.Inc()
	}
}

// Fence counts a transaction the fence refused.
func (s *Store) Fence() {
	if s != nil {
		s.fence.Inc()
	}
}

// Cache counts memcached's failures: calls that failed (the server then
// answers from MySQL) and calls not made because memcached was recently
// down (fallbacks).
type Cache struct {
	errors, skipped prometheus.Counter
}

// NewCache registers the memcached counters.
func NewCache(reg prometheus.Registerer) *Cache {
	errs := prometheus.NewCounter(prometheus.CounterOpts{Name: "hongbao_cache_errors_total",
		Help: "memcached calls that failed (timeouts, refused connections); the server falls back to MySQL."})
	skipped := prometheus.NewCounter(prometheus.CounterOpts{Name: "hongbao_cache_fallbacks_total",
		Help: "memcached calls not made because memcached failed within the last second (answered from MySQL)."})
	reg.MustRegister(errs, skipped)
	return &Cache{errors: errs, skipped: skipped}
}

// Error counts a failed memcached call.
func (c *Cache) Error() {
	if c != nil {
		c.errors.Inc()
	}
}

// Fallback counts a memcached call skipped while it is down.
func (c *Cache) Fallback() {
	if c != nil {
		c.skipped.Inc()
	}
}
