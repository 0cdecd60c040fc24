// Package audit is the money audit: invariants 1 and 2 in every SET's
// MySQL and invariant 4 (every fen debited is credited, refunded, held,
// paid for a pending packet or waiting in an outbox) across the SETs and
// the wallet, on a quiet or a live system, with the orphan packets the
// settlers would never refund, the fence claims nothing backs, and, when
// the sums disagree, the packets behind them. hbctl verify prints its
// Report.
//
// It lives under store/ because it is a reading of the stores and nothing
// else: consistent snapshots of each SET's MySQL (store.Snapshot) and of
// the wallet (wallet.Snapshot), matched against each other; the topology
// is read only to choose which snapshot counts a bucket. It neither serves
// nor settles (set/), and it writes only when asked to restore the marks
// of orphans, through store.RestoreMarks.
package audit

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// Set is one SET's pools, open for the whole audit (the caller closes
// them).
type Set struct {
	Name string
	DB   *sql.DB // its MySQL
	Cold *sql.DB // its archive: DB again when they are the same
}

// Sources are what an audit reads.
type Sources struct {
	Wallet *wallet.Wallet
	Sets   []Set
	// Meta is the meta database, whose topology and journal of moves say
	// which SET's snapshot counts a bucket; nil: no topology, every SET's
	// snapshot counts every table of its MySQL.
	Meta     *sql.DB
	Location *time.Location // the day tables' time zone
}

// Options tune an audit.
type Options struct {
	// OrphansBefore: a packet expired before it, not settled, without the
	// mark that settles it is an orphan. Take it before the audit starts,
	// so that a packet younger than the settlers' sweep delay is none.
	OrphansBefore time.Time
	// Retry, when not nil, is told the buckets whose handover overlapped
	// the opening of the snapshots, each time they are opened again.
	Retry func(unsettled []hongbao.Bucket)
}

// Report is what an audit found. An audit that failed returns what it
// had read until then: the SETs read (Sets), then Wallet, then Flight,
// each nil or empty until read; the sums and the violations of the sums
// are set only when it succeeded.
type Report struct {
	OrphansBefore time.Time
	StaleClaims   []string    // fence claims nothing backs (staleClaims), one line each
	Sets          []SetReport // in the order of Sources.Sets
	// Wallet is the wallet's totals as its snapshot has them, and
	// WalletBad its violations of the ledger (balances, entries).
	Wallet    *wallet.Totals
	WalletBad []string
	Flight    *Flight
	// Debits, Credits, Refunds are the wallet's totals less what was
	// written after the SETs were read; Sums are the SETs' totals summed,
	// the pending packets paid for added, the outbox rows already
	// delivered taken out. Invariant 4 compares the two.
	Counted wallet.Totals
	Sums    store.SetTotals
	Money   []string // the sums' violations
	// Explained names the packets behind a violation of the sums (at
	// most ExplainLimit, and a line saying there are more).
	Explained []string
}

// SetReport is one SET as the audit read it.
type SetReport struct {
	Name    string
	Totals  store.SetTotals
	Bad     []string // violations of invariants 1 and 2 in its snapshot
	Orphans []store.Orphan
	// Checked is set once its orphans were looked for.
	Checked bool
}

// Violations are every violation found, in the order hbctl verify prints
// them: stale claims, each SET's (its snapshot's, then its orphans), the
// wallet's, the in-flight entries', the sums', the packets named.
func (r *Report) Violations() []string {
	out := append([]string(nil), r.StaleClaims...)
	for _, s := range r.Sets {
		out = append(out, s.Bad...)
		for _, o := range s.Orphans {
			out = append(out, fmt.Sprintf("SET %s: %s", s.Name, o))
		}
	}
	out = append(out, r.WalletBad...)
	if r.Flight != nil {
		out = append(out, r.Flight.Bad...)
	}
	out = append(append(out, r.Money...), r.Explained...)
	return out
}

// Run audits the SETs and the wallet. It reads in an order that makes
// what is in flight between them explicit (money moves between a SET and
// the wallet while it reads: a credit delivered, a packet sent, a share
// opened):
//
//  1. the ledger's last seq L: every entry up to L was written from a share
//     or packet that had committed before this moment;
//  2. each SET in one consistent snapshot (kept open), each bucket counted
//     in exactly one of them (see settleFor);
//  3. the wallet in one consistent snapshot, after every SET.
//
// An outbox row whose key the wallet's snapshot has is being delivered: it
// is counted once, in the ledger (and must have the same amount). A ledger
// entry after L whose source (packet, share, closed packet) no SET's
// snapshot has was written after the SETs were read: it is not counted,
// but its source must exist now, else it is a violation. Pending packets
// count as paid when the wallet's snapshot has their debit.
//
// In each SET's snapshot it also looks for orphans (store.Orphan): packets
// expired before opt.OrphansBefore, not settled, without the mark the
// settler scans to settle them. Their money is conserved (held) but never
// refunded, so each is a violation; RestoreMarks writes their marks back.
func Run(ctx context.Context, src Sources, opt Options) (*Report, error) {
	r := &Report{OrphansBefore: opt.OrphansBefore}
	last, err := src.Wallet.LastSeq(ctx)
	if err != nil {
		return r, fmt.Errorf("audit: the ledger's last entry: %w", err)
	}
	snaps, err := r.readSets(ctx, src, opt)
	defer closeAll(snaps)
	if err != nil {
		return r, err
	}
	ws, err := src.Wallet.Snapshot(ctx)
	if err != nil {
		return r, fmt.Errorf("audit: the wallet's snapshot: %w", err)
	}
	defer ws.Close()
	wt, bad, err := ws.Verify(ctx)
	if err != nil {
		return r, fmt.Errorf("audit: the wallet: %w", err)
	}
	r.Wallet, r.WalletBad = &wt, bad
	fl, err := inFlight(ctx, snaps, ws, last)
	if err != nil {
		return r, err
	}
	r.Flight = &fl
	r.sum(snaps)
	if r.Money = money(r.Counted, r.Sums); len(r.Money) > 0 {
		// Name the packets behind the sums (only then: it reads the whole ledger).
		if r.Explained, err = explain(ctx, snaps, ws, &fl, ExplainLimit); err != nil {
			return r, err
		}
	}
	return r, nil
}

// sum fills Counted and Sums from the snapshots and what was in flight.
func (r *Report) sum(snaps []*store.Snapshot) {
	var sum store.SetTotals
	for _, s := range snaps {
		sum = add(sum, s.Totals)
	}
	fl := r.Flight
	sum.PendingPaid = fl.PendingPaid
	sum.OutboxOpen -= fl.Delivered.Credits
	sum.OutboxOpenN -= fl.Delivered.CreditsN
	sum.OutboxRef -= fl.Delivered.Refunds
	wt := *r.Wallet
	wt.Debits -= fl.Late.Debits
	wt.Credits -= fl.Late.Credits
	wt.CreditsN -= fl.Late.CreditsN
	wt.Refunds -= fl.Late.Refunds
	r.Counted, r.Sums = wt, sum
}

// readSets opens every SET's snapshot (openSnapshots: each bucket counted
// in one of them) and looks for orphans in each. The snapshots are
// returned even with an error, for the caller to close.
func (r *Report) readSets(ctx context.Context, src Sources, opt Options) ([]*store.Snapshot, error) {
	pools := make([]setPools, len(src.Sets))
	for i, s := range src.Sets {
		// A fleet with a topology: each SET counts the buckets assign
		// gives it, so a SET sharing a MySQL, a move's copy on its target
		// or a source's copy in its grace period is counted once.
		pools[i] = setPools{set: s.Name, name: s.Name, db: s.DB, cold: s.Cold}
		if src.Meta == nil {
			pools[i].name = ""
		}
	}
	snaps, stale, err := openSnapshots(ctx, src.Meta, pools, src.Location, opt.Retry)
	if err != nil {
		return nil, err
	}
	r.StaleClaims = stale
	for i, s := range src.Sets {
		r.Sets = append(r.Sets, SetReport{Name: s.Name, Totals: snaps[i].Totals, Bad: snaps[i].Bad})
		sr := &r.Sets[len(r.Sets)-1]
		if sr.Orphans, err = snaps[i].Orphans(ctx, opt.OrphansBefore); err != nil {
			return snaps, fmt.Errorf("SET %s: %w", s.Name, err)
		}
		sr.Checked = true
	}
	return snaps, nil
}

// RestoreMarks writes back the marks SET s's orphans lack, in one
// transaction, so that its settlers settle them; it returns what it did
// for each.
func RestoreMarks(ctx context.Context, s Set, loc *time.Location, orphans []store.Orphan) ([]store.Restored, error) {
	st := store.New(s.DB, s.Name, loc, time.Now, nil)
	done, err := st.RestoreMarks(ctx, orphans)
	if err != nil {
		return nil, fmt.Errorf("SET %s: %w", s.Name, err)
	}
	return done, nil
}

// money checks invariant 4 and its parts.
func money(wt wallet.Totals, s store.SetTotals) []string {
	var bad []string
	if got := wt.Credits + wt.Refunds + s.Held + s.PendingPaid + s.OutboxOpen + s.OutboxRef; got != wt.Debits {
		bad = append(bad, fmt.Sprintf("money not conserved: debits %d != credits + refunds + held + pending + outbox %d (diff %d)",
			wt.Debits, got, wt.Debits-got))
	}
	if s.Funded+s.PendingPaid != wt.Debits {
		bad = append(bad, fmt.Sprintf("packets funded %d (+ pending paid %d) != send debits %d", s.Funded, s.PendingPaid, wt.Debits))
	}
	if s.Details != wt.CreditsN+s.OutboxOpenN {
		bad = append(bad, fmt.Sprintf("%d shares but %d credits delivered + %d in outbox", s.Details, wt.CreditsN, s.OutboxOpenN))
	}
	return bad
}

// add sums two SETs' totals.
func add(a, b store.SetTotals) store.SetTotals {
	a.Packets += b.Packets
	a.Funded += b.Funded
	a.Held += b.Held
	a.PendingPaid += b.PendingPaid
	a.Details += b.Details
	a.OutboxOpen += b.OutboxOpen
	a.OutboxRef += b.OutboxRef
	a.OutboxOpenN += b.OutboxOpenN
	return a
}
