package settle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// Settler moves a SET's money to the wallet: it delivers outbox entries
// (credits to openers, refunds) at least once, which the ledger's unique
// keys make exactly once; closes expired packets and so refunds their rest;
// and settles sends whose debit was left undecided by a crash. Every step
// is idempotent, so settlers may be killed at any point, and several may
// run for one SET.
type Settler struct {
	store  *store.Store
	wallet *wallet.Wallet
	now    func() time.Time
	log    *zap.Logger
	// SweepAfter is how old a pending send must be before the sweeper
	// decides it, leaving the sending server time to finish it.
	SweepAfter time.Duration
	// Interval is the pause between rounds that found no work.
	Interval time.Duration
	// DeliverEvery is the shortest time from the start of a round that
	// delivered credits to the start of the next, unless the round read
	// all it may read at once (a backlog: the next starts at once).
	// Under a steady stream of opens, rounds back to back each carry the
	// few credits written during the last one, and every round costs
	// the same transactions on the core group and the SET whatever it
	// carries: spaced, they carry more each. A credit then waits up to
	// this long more.
	DeliverEvery time.Duration
	// DueEvery is the pause between passes over the due lists (expired
	// packets, undecided sends) that found nothing; the outbox is read
	// every round. Users wait for a credit; an expired packet's refund
	// or a sweep that comes a second later costs nobody anything, and
	// each pass reads the SET's fence and the topology (at 5 rounds a
	// second they were most of an idle SET MySQL's work).
	DueEvery time.Duration
	// Batch is the most credits one wallet transaction records.
	Batch int
	// Workers is the most wallet transactions a delivery runs at once:
	// one unless it read more than Batch rows (see Deliver).
	Workers int
	// HoldFor is how long an outbox row the settler cannot deliver as it
	// is (see held) is left out of its reads before it is tried again.
	HoldFor time.Duration
	// Metrics counts deliveries, closes, sweeps and rounds; nil: none.
	Metrics *metrics.Settle

	held held
}

// New returns a Settler for one SET.
func New(st *store.Store, w *wallet.Wallet, now func() time.Time, log *zap.Logger) *Settler {
	return &Settler{store: st, wallet: w, now: now, log: log, SweepAfter: 30 * time.Second, Interval: 200 * time.Millisecond,
		DueEvery: time.Second, DeliverEvery: 100 * time.Millisecond, Batch: 500, Workers: 4, HoldFor: 10 * time.Minute}
}

// Run settles until ctx ends.
func (s *Settler) Run(ctx context.Context) {
	p := pace{every: s.DueEvery} // real time: the pace of the passes, not a money time
	for {
		start := time.Now()
		due := p.due(start)
		r, err := s.round(ctx, due)
		if due {
			p.ran(time.Now(), r.due, err)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("settle round failed; retrying", zap.Error(err))
		}
		if ctx.Err() == nil {
			s.Metrics.Round(err, s.now())
		}
		wait := s.wait(r, err, time.Since(start))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Round does one pass of every job and returns how many items it handled.
func (s *Settler) Round(ctx context.Context) (int, error) {
	r, err := s.round(ctx, true)
	return r.due + r.sent, err
}

// roundWork is what a round handled: items of the due lists (sweeps and
// closes) and outbox rows delivered, and whether the delivery read all it
// may read at once (more may be waiting).
type roundWork struct {
	due, sent int
	full      bool
}

// round delivers the outbox and, when due, passes over the due lists.
func (s *Settler) round(ctx context.Context, due bool) (roundWork, error) {
	var r roundWork
	var err1, err2 error
	if due {
		var swept, closed int
		swept, err1 = s.Sweep(ctx)
		closed, err2 = s.CloseExpired(ctx)
		r.due = swept + closed
	}
	d, err3 := s.deliver(ctx)
	r.sent, r.full = d.sent, d.full
	return r, errors.Join(err1, err2, err3)
}

// wait is the pause after a round that took took: none while work may be
// waiting (a full delivery, or due lists that had work), up to
// DeliverEvery from the round's start after a delivery, Interval after a
// round that found nothing or failed.
func (s *Settler) wait(r roundWork, err error, took time.Duration) time.Duration {
	switch {
	case err != nil || r.due+r.sent == 0:
		return s.Interval
	case r.full || r.due > 0:
		return 0
	}
	return max(s.DeliverEvery-took, 0)
}

// CloseExpired closes packets past expiry, writing their refunds.
func (s *Settler) CloseExpired(ctx context.Context) (int, error) {
	ids, err := s.store.Due(ctx, "expiry", s.now(), 200)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		done, refund, err := s.store.Close(ctx, id)
		if errors.Is(err, hongbao.ErrWrongSet) {
			continue // moved away; its new SET closes it
		}
		if err != nil {
			return n, err
		}
		if refund > 0 {
			s.log.Info("packet expired; refund queued", zap.Stringer("packet_id", id), zap.Int64("refund", refund))
		}
		if done { // a pending one waits for the sweeper: not work done
			n++
			s.Metrics.Closed(1)
		}
	}
	return n, nil
}

// Sweep decides sends left pending by a crash between the packet's insert
// and its debit. The ledger key of the debit is the single decision point:
// the sweeper writes a void under it; if the debit got there first the
// packet is funded, else it is cancelled and a late debit becomes a no-op.
func (s *Settler) Sweep(ctx context.Context) (int, error) {
	ids, err := s.store.Due(ctx, "pending", s.now().Add(-s.SweepAfter), 100)
	if err != nil {
		return 0, err
	}
	for i, id := range ids {
		p, err := s.store.Head(ctx, id)
		if err != nil {
			return i, err
		}
		e, _, err := s.wallet.Apply(ctx, hongbao.Entry{Key: hongbao.SendKey(id), User: p.Sender, Kind: hongbao.KindVoid, Packet: id})
		if err != nil {
			return i, err
		}
		to := hongbao.Funded
		if e.Kind == hongbao.KindVoid {
			to = hongbao.Cancelled
		}
		if _, err := s.store.Fund(ctx, id, to); err != nil {
			return i, fmt.Errorf("sweep %s: %w", id, err)
		}
		s.Metrics.Swept(1)
		s.log.Info("pending send settled", zap.Stringer("packet_id", id), zap.Int("funding", int(to)))
	}
	return len(ids), nil
}

// pace spaces the passes over the due lists: at most one per every,
// unless the last found work or failed (more may be due: look again at
// once).
type pace struct {
	every time.Duration
	last  time.Time // end of the last idle pass; zero: due now
}

func (p *pace) due(now time.Time) bool { return now.Sub(p.last) >= p.every }

// ran records a pass that ended at now having handled work items.
func (p *pace) ran(now time.Time, work int, err error) {
	if work > 0 || err != nil {
		p.last = time.Time{}
		return
	}
	p.last = now
}
