package settle

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/store"
)

// Deliver applies undelivered outbox entries to the wallet, then deletes
// them. A crash between the two re-delivers, which the ledger ignores.
//
// It reads up to Batch*Workers entries (whole rows: a packed row is the
// credits of a packet's opens in one transaction) and, when they are more
// than Batch, splits them by user into up to Workers parts (one per Batch
// entries read) delivered at once; each part goes in wallet transactions
// of up to Batch credits (a part the split by user leaves larger than
// Batch takes one more). Then it deletes, in one statement, every row the
// ledger now holds all of. Entries one transaction can hold go in one: a
// wallet transaction's cost on the core group (its commit, its replica's
// acknowledgement and apply) hardly depends on how many credits it
// records, and four transactions of a quarter each cost the core group
// four times one.
// A row the ledger cannot hold as it is (its key recorded for another
// entry, or an entry the wallet refuses: never expected) stays in the
// outbox for hbctl verify to name, and is set aside for HoldFor so that
// the rows behind it are read and delivered (see held).
// A key names one user, so two of its transactions never record the same
// key nor touch the same account; another settler of the same SET may
// (they then wait on each other's rows, and the ledger's unique key keeps
// each credit once).
func (s *Settler) Deliver(ctx context.Context) (int, error) {
	d, err := s.deliver(ctx)
	return d.sent, err
}

// delivery is what one Deliver did: rows delivered, and whether it read
// all it may read at once (more may be waiting).
type delivery struct {
	sent int
	full bool
}

func (s *Settler) deliver(ctx context.Context) (delivery, error) {
	workers, batch := max(s.Workers, 1), max(s.Batch, 1)
	skip := s.held.skip(time.Now(), s.HoldFor) // real time: how long a row is left aside, not a money time
	s.Metrics.Held(len(skip))
	rows, err := s.store.Outbox(ctx, batch*workers, skip...)
	if err != nil || len(rows) == 0 {
		return delivery{}, err
	}
	// Full by the entries read, not those delivered: a row kept for a
	// conflicting key comes back first in every read.
	full := len(rows) >= batch*workers
	rows, aside := s.readable(rows)
	workers = max(min(workers, (len(rows)+batch-1)/batch), 1)
	parts := make([][]store.OutboxRow, workers)
	for _, r := range rows {
		i := uint64(r.Entry.User) % uint64(workers)
		parts[i] = append(parts[i], r)
	}
	done := make([]parted, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i, part := range parts {
		if len(part) > 0 {
			wg.Go(func() { done[i], errs[i] = s.deliverPart(ctx, part, batch) })
		}
	}
	wg.Wait()
	var delivered []int64
	for _, d := range done {
		delivered, aside = append(delivered, d.delivered...), append(aside, d.aside...)
	}
	if len(aside) > 0 {
		s.Metrics.Held(s.held.hold(time.Now(), aside))
	}
	return delivery{sent: len(delivered), full: full}, errors.Join(errors.Join(errs...), s.store.Delivered(ctx, whole(rows, delivered)))
}

// readable returns the rows that are entries, and the IDs of those that
// are not (a packed row not as written: never expected), logged and set
// aside like an entry the wallet refuses.
func (s *Settler) readable(rows []store.OutboxRow) ([]store.OutboxRow, []int64) {
	var aside []int64
	ok := rows[:0:0]
	for _, r := range rows {
		if r.Bad != nil {
			s.log.Error("outbox row not readable; set aside", zap.Int64("outbox_id", r.ID), zap.String("key", r.Entry.Key), zap.Error(r.Bad))
			aside = append(aside, r.ID)
			continue
		}
		ok = append(ok, r)
	}
	return ok, aside
}

// whole returns the IDs of the rows every entry of which is in delivered
// (the entries' row IDs), once each, in order: a packed row's credits may
// go in several parts and transactions, and the row is removed only once
// the ledger holds all of them. A row with an entry set aside or not
// attempted (its part failed first) stays in the outbox; the next round
// delivers it again, and the ledger keeps each credit once.
func whole(rows []store.OutboxRow, delivered []int64) []int64 {
	left := make(map[int64]int, len(rows))
	for _, r := range rows {
		left[r.ID]++
	}
	for _, id := range delivered {
		left[id]--
	}
	var ids []int64
	for _, r := range rows {
		if n, ok := left[r.ID]; ok && n == 0 {
			ids = append(ids, r.ID)
			delete(left, r.ID)
		}
	}
	return ids
}

// parted is what the delivery of one part did: the IDs of the rows the
// ledger now holds, and of those it cannot hold as they are (kept in the
// outbox and set aside).
type parted struct {
	delivered, aside []int64
}

// deliverPart delivers rows in transactions of up to batch credits. It
// stops at the first failure, returning what it did before.
func (s *Settler) deliverPart(ctx context.Context, rows []store.OutboxRow, batch int) (parted, error) {
	var p parted
	for chunk := range slices.Chunk(rows, batch) {
		stored, err := s.record(ctx, chunk)
		if err != nil {
			return p, err
		}
		for _, r := range chunk {
			got, ok := stored[r.Entry.Key]
			switch {
			case !ok: // the wallet refused it (record logged why)
				p.aside = append(p.aside, r.ID)
			case got.User != r.Entry.User || got.Amount != r.Entry.Amount:
				// Never expected: the same key with another meaning. Keep the
				// row so verify reports it instead of silently dropping money.
				s.log.Error("ledger key already used for a different entry; outbox row set aside", zap.Int64("outbox_id", r.ID),
					zap.String("key", r.Entry.Key), zap.Stringer("user", r.Entry.User), zap.Int64("amount", r.Entry.Amount))
				p.aside = append(p.aside, r.ID)
			default:
				p.delivered = append(p.delivered, r.ID)
			}
		}
	}
	return p, nil
}

// record writes rows to the ledger (credits in one transaction; anything
// else, never expected in an outbox, one entry at a time through Apply,
// which refuses an overdraft) and returns the ledger's entry under each
// key.
func (s *Settler) record(ctx context.Context, rows []store.OutboxRow) (map[string]hongbao.Entry, error) {
	stored := make(map[string]hongbao.Entry, len(rows))
	credits := make([]hongbao.Entry, 0, len(rows))
	for _, r := range rows {
		if r.Entry.Amount > 0 {
			credits = append(credits, r.Entry)
			continue
		}
		got, _, err := s.wallet.Apply(ctx, r.Entry)
		if refused(err) {
			s.log.Error("wallet refused an outbox entry; outbox row set aside", zap.Int64("outbox_id", r.ID), zap.String("key", r.Entry.Key),
				zap.Stringer("user", r.Entry.User), zap.Int64("amount", r.Entry.Amount), zap.String("kind", r.Entry.Kind), zap.Error(err))
			continue
		}
		if err != nil {
			return nil, err
		}
		stored[got.Key] = got
	}
	c, err := s.wallet.Credit(ctx, credits)
	if err != nil {
		return nil, err
	}
	var sum int64
	for _, e := range c.Fresh {
		stored[e.Key] = e
		sum += e.Amount
		s.Metrics.Delivered(e.Kind)
		if ce := s.log.Check(zap.DebugLevel, "credit delivered"); ce != nil {
			ce.Write(zap.String("key", e.Key), zap.Stringer("packet_id", e.Packet),
				zap.Stringer("user", e.User), zap.Int64("amount", e.Amount), zap.String("kind", e.Kind))
		}
	}
	for _, e := range c.Existing {
		stored[e.Key] = e
	}
	if len(c.Fresh) > 0 {
		s.log.Named(configs.MoneyLogger).Info("credits delivered", zap.Int("entries", len(c.Fresh)), zap.Int64("amount", sum),
			zap.Int64("first_seq", c.Fresh[0].Seq), zap.Int("redelivered", len(c.Existing)))
	}
	return stored, nil
}
