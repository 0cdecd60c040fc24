package audit

import (
	"context"
	"fmt"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// Flight is what moved between the SETs' snapshots and the wallet's.
type Flight struct {
	PendingPaid int64         // totals of pending packets whose debit the wallet has
	Delivered   wallet.Totals // outbox rows the wallet has too (Credits, CreditsN, Refunds)
	DeliveredN  int
	Late        wallet.Totals // ledger entries written from what the SETs' snapshots lack
	LateN       int
	Bad         []string // outbox rows the ledger has otherwise, entries without a source
	// The keys of those: explain leaves the late entries out as the sums
	// do, and counts an outbox row already delivered in the ledger only.
	lateKeys, deliveredKeys map[string]bool
	last                    int64           // the ledger's last seq before the SETs were read
	recent                  []hongbao.Entry // the wallet snapshot's entries after last
}

// inFlight matches the SETs' snapshots against the wallet's (see Run).
func inFlight(ctx context.Context, snaps []*store.Snapshot, ws *wallet.Snapshot, last int64) (Flight, error) {
	fl := Flight{lateKeys: map[string]bool{}, deliveredKeys: map[string]bool{}, last: last}
	for _, s := range snaps {
		if err := fl.delivering(ctx, s, ws); err != nil {
			return fl, err
		}
	}
	recent, err := ws.Since(ctx, last)
	if err != nil {
		return fl, err
	}
	fl.recent = recent
	return fl, fl.written(ctx, snaps)
}

// delivering counts the pending packets of snapshot s the wallet's
// snapshot has the debit of, and the outbox rows it has the entry of.
func (fl *Flight) delivering(ctx context.Context, s *store.Snapshot, ws *wallet.Snapshot) error {
	keys := make([]string, 0, len(s.Pending)+len(s.Outbox))
	for _, p := range s.Pending {
		keys = append(keys, hongbao.SendKey(p.Packet))
	}
	for _, o := range s.Outbox {
		keys = append(keys, o.Key)
	}
	have, err := ws.Entries(ctx, keys)
	if err != nil {
		return err
	}
	for _, p := range s.Pending {
		if en, ok := have[hongbao.SendKey(p.Packet)]; ok && en.Kind == hongbao.KindSend {
			fl.PendingPaid += p.Total
		}
	}
	for _, o := range s.Outbox {
		en, ok := have[o.Key]
		if !ok {
			continue
		}
		if en.Amount != o.Amount || en.Kind != o.Kind {
			fl.Bad = append(fl.Bad, fmt.Sprintf("outbox entry %s (%s %d) is in the ledger as %s %d", o.Key, o.Kind, o.Amount, en.Kind, en.Amount))
		}
		fl.DeliveredN++
		fl.deliveredKeys[o.Key] = true
		switch o.Kind {
		case hongbao.KindOpen:
			fl.Delivered.Credits += o.Amount
			fl.Delivered.CreditsN++
		case hongbao.KindRefund:
			fl.Delivered.Refunds += o.Amount
		}
	}
	return nil
}

// written sorts the ledger entries after the last seq read first: those
// whose source a SET's snapshot has are counted; the others were written
// after the SETs were read (late: not counted), or have no source at all
// (a violation, counted so that the sums show it too).
func (fl *Flight) written(ctx context.Context, snaps []*store.Snapshot) error {
	recent := fl.recent
	if len(recent) == 0 {
		return nil
	}
	keys := make([]string, len(recent))
	for i, en := range recent {
		keys[i] = en.Key
	}
	inSnap, err := anySources(ctx, snaps, keys, (*store.Snapshot).Sources)
	if err != nil {
		return err
	}
	var lateKeys []string
	for _, k := range keys {
		if !inSnap[k] {
			lateKeys = append(lateKeys, k)
		}
	}
	now, err := anySources(ctx, snaps, lateKeys, (*store.Snapshot).SourcesNow)
	if err != nil {
		return err
	}
	for _, en := range recent {
		if inSnap[en.Key] {
			continue
		}
		if !now[en.Key] {
			fl.Bad = append(fl.Bad, fmt.Sprintf("ledger entry %s (seq %d, %d fen) has no packet or share in any SET", en.Key, en.Seq, en.Amount))
			continue // counted, so that the sums show it too
		}
		fl.LateN++
		fl.lateKeys[en.Key] = true
		switch en.Kind {
		case hongbao.KindSend:
			fl.Late.Debits -= en.Amount
		case hongbao.KindOpen:
			fl.Late.Credits += en.Amount
			fl.Late.CreditsN++
		case hongbao.KindRefund:
			fl.Late.Refunds += en.Amount
		}
	}
	return nil
}

// anySources is the union over the snapshots of look(keys).
func anySources(ctx context.Context, snaps []*store.Snapshot, keys []string,
	look func(*store.Snapshot, context.Context, []string) (map[string]bool, error)) (map[string]bool, error) {
	all := map[string]bool{}
	if len(keys) == 0 {
		return all, nil
	}
	for _, s := range snaps {
		found, err := look(s, ctx, keys)
		if err != nil {
			return nil, err
		}
		for k := range found {
			all[k] = true
		}
	}
	return all, nil
}
