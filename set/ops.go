package set

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/metrics"
)

// outcome names an open's answer for hongbao_opens_total, as the client
// sees it (authed answers a timeout busy too).
func outcome(res hongbao.OpenResult, err error) string {
	switch {
	case err == nil && res.Status == hongbao.AlreadyOpened:
		return metrics.OutcomeAlready
	case err == nil:
		return metrics.OutcomeOpened
	case errors.Is(err, hongbao.ErrSoldOut):
		return metrics.OutcomeSoldOut
	case errors.Is(err, hongbao.ErrExpired):
		return metrics.OutcomeExpired
	case errors.Is(err, hongbao.ErrBusy), errors.Is(err, hongbao.ErrMoving), errors.Is(err, context.DeadlineExceeded), errors.Is(err, sql.ErrTxDone):
		return metrics.OutcomeBusy
	case api.Status(err) < 500:
		return metrics.OutcomeRejected
	}
	return metrics.OutcomeError
}

// Drain turns the server not ready (its /readyz answers 503, so routers
// stop sending it packets) while it still serves what arrives; Close then
// drains the queues.
func (s *Server) Drain() { s.ready.Store(false) }

// Ready is the server's readiness, which both its /readyz (the routers'
// probe) and the admin listener answer: not draining, its MySQL answers,
// and Deps.Ready (the topology's freshness) holds.
func (s *Server) Ready(ctx context.Context) error {
	if !s.ready.Load() {
		return fmt.Errorf("draining: %w", hongbao.ErrUnavailable)
	}
	if err := s.store.DB().PingContext(ctx); err != nil {
		return fmt.Errorf("mysql: %v: %w", err, hongbao.ErrUnavailable)
	}
	if s.readyMore != nil {
		if err := s.readyMore(ctx); err != nil {
			return fmt.Errorf("%v: %w", err, hongbao.ErrUnavailable)
		}
	}
	return nil
}

// Register registers the gauges read from the server's state at scrape
// time: its queues and what it keeps in memory. The byte counts are
// estimates from the bounds' own accounting, calibrated by BENCHMARKS.md's
// memory run (a one-share packet: 184 B in the memo for 5 units, 439 B
// known for 9).
func (s *Server) Register(reg prometheus.Registerer) {
	metrics.Gauge(reg, "hongbao_queue_depth", "Opens queued or being applied, all packets together.",
		func() float64 { return float64(s.queue.Stats().Queued) })
	metrics.Gauge(reg, "hongbao_queue_live_packets", "Packets with a live queue and worker.",
		func() float64 { return float64(s.queue.Stats().Packets) })
	metrics.Gauge(reg, "hongbao_memo_packets", "Sold-out packets answered from memory.",
		func() float64 { return float64(s.memo.size()) })
	metrics.Gauge(reg, "hongbao_memo_bytes", "Estimated memory of the sold-out memo.",
		func() float64 { return float64(s.memo.units() * 37) })
	metrics.Gauge(reg, "hongbao_known_packets", "Small packets taking opens kept with every share in memory.",
		func() float64 { return float64(s.known.size()) })
	metrics.Gauge(reg, "hongbao_known_bytes", "Estimated memory of the known packets.",
		func() float64 { return float64(s.known.units() * 49) })
}

// units returns the openers held, packets' own cost included.
func (m *soldOut) units() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.held
}

// units returns the shares held, packets' own cost included.
func (k *known) units() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.held
}

// OutboxBacklog is the SET's outbox: entries waiting for the settler and
// when the oldest was written.
func (s *Server) OutboxBacklog(ctx context.Context) (int, time.Time, error) {
	return s.store.OutboxBacklog(ctx)
}
