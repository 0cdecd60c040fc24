package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/cmd/internal/settings"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// cmdVerify checks invariants 1, 2 and 4 across every SET and the wallet,
// on a quiet or a live system. Money moves between a SET and the wallet
// while it reads (a credit delivered, a packet sent, a share opened), so it
// reads in an order that makes what is in flight explicit:
//
//  1. the ledger's last seq L: every entry up to L was written from a share
//     or packet that had committed before this moment;
//  2. each SET in one consistent snapshot (kept open);
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
// past their expiry by more than --sweep-after, not settled, without the
// mark the settler scans to settle them. Their money is conserved (held)
// but never refunded, so each is a violation; --restore-marks writes their
// marks back, and the settlers then settle them.
func cmdVerify(ctx context.Context, e *env, args []string) (err error) {
	fs := flags("verify", e)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	textfile := fs.String("textfile", "", "also write the result as Prometheus metrics to this file (hongbao_verify_ok, for node_exporter's textfile collector)")
	sweepAfter := fs.Duration("sweep-after", 0, "a packet past its expiry by more than this without the mark that settles it is an orphan (default: settle.sweep_after of the config, the settlers' sweep delay)")
	restore := fs.Bool("restore-marks", false, "write back the marks the orphans found lack (one transaction per SET), so that the settlers settle them")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *sweepAfter < 0 {
		return usageError{"--sweep-after must not be negative"}
	}
	given := false // --sweep-after 0s is no delay at all; absent, the config's
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "sweep-after" })
	if *textfile != "" {
		defer func() { err = errors.Join(err, writeVerify(*textfile, err == nil)) }()
	}
	cfg, w, err := openWallet(ctx, e, *cfgPath)
	if err != nil {
		return err
	}
	defer w.Close()
	if !given {
		*sweepAfter = cfg.Settle.SweepAfter.D()
	}
	before := time.Now().Add(-*sweepAfter) // before any snapshot: a packet younger is no orphan
	sets, err := settings.Sets(ctx, cfg)   // the meta database's, when there is one
	if err != nil {
		return err
	}
	last, err := w.LastSeq(ctx)
	if err != nil {
		return err
	}
	var closers []func() // each snapshot before its pools: in reverse
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	snaps, bad, lost, err := readSets(ctx, e, cfg, sets, before, &closers)
	if err != nil {
		return err
	}
	var sum store.SetTotals
	ws, err := w.Snapshot(ctx)
	if err != nil {
		return err
	}
	defer ws.Close()
	wt, b, err := ws.Verify(ctx)
	if err != nil {
		return err
	}
	bad = append(bad, b...)
	fmt.Fprintf(e.stdout, "wallet: debits %d, credits %d (%d), refunds %d, top-ups %d: balances checked against the ledger\n",
		wt.Debits, wt.Credits, wt.CreditsN, wt.Refunds, wt.TopUps)
	fl, b, err := inFlight(ctx, snaps, ws, last)
	if err != nil {
		return err
	}
	bad = append(bad, b...)
	for _, s := range snaps {
		sum = add(sum, s.Totals)
	}
	sum.PendingPaid = fl.pendingPaid
	sum.OutboxOpen -= fl.delivered.Credits
	sum.OutboxOpenN -= fl.delivered.CreditsN
	sum.OutboxRef -= fl.delivered.Refunds
	wt.Debits -= fl.late.Debits
	wt.Credits -= fl.late.Credits
	wt.CreditsN -= fl.late.CreditsN
	wt.Refunds -= fl.late.Refunds
	fmt.Fprintf(e.stdout, "in flight: %d outbox entries already in the ledger (%d fen, counted once), %d ledger entries written after the SETs were read (debits %d, credits %d, refunds %d: not counted)\n",
		fl.deliveredN, fl.delivered.Credits+fl.delivered.Refunds, fl.lateN, fl.late.Debits, fl.late.Credits, fl.late.Refunds)
	wrong := money(wt, sum)
	bad = append(bad, wrong...)
	if len(wrong) > 0 {
		// Name the packets behind the sums (only then: it reads the whole ledger).
		named, err := explain(ctx, snaps, ws, fl, explainLimit)
		if err != nil {
			return err
		}
		bad = append(bad, named...)
	}
	fmt.Fprintf(e.stdout, "invariant 4: debits %d == credits %d + refunds %d + held %d + pending paid %d + outbox %d\n",
		wt.Debits, wt.Credits, wt.Refunds, sum.Held, sum.PendingPaid, sum.OutboxOpen+sum.OutboxRef)
	for _, v := range bad {
		fmt.Fprintln(e.stdout, "VIOLATION:", v)
	}
	if *restore {
		if err := restoreMarks(ctx, e, lost); err != nil {
			return err
		}
	}
	if len(bad) > 0 {
		return errors.New(fmt.Sprint(len(bad), " violation(s)"))
	}
	fmt.Fprintln(e.stdout, "OK: every invariant holds")
	return nil
}

// flight is what moved between the SETs' snapshots and the wallet's.
type flight struct {
	pendingPaid int64         // totals of pending packets whose debit the wallet has
	delivered   wallet.Totals // outbox rows the wallet has too (Credits, CreditsN, Refunds)
	deliveredN  int
	late        wallet.Totals // ledger entries written from what the SETs' snapshots lack
	lateN       int
	// The keys of those: explain leaves the late entries out as the sums
	// do, and counts an outbox row already delivered in the ledger only.
	lateKeys, deliveredKeys map[string]bool
	last                    int64           // the ledger's last seq before the SETs were read
	recent                  []hongbao.Entry // the wallet snapshot's entries after last
}

// inFlight matches the SETs' snapshots against the wallet's (see cmdVerify).
func inFlight(ctx context.Context, snaps []*store.Snapshot, ws *wallet.Snapshot, last int64) (flight, []string, error) {
	fl := flight{lateKeys: map[string]bool{}, deliveredKeys: map[string]bool{}, last: last}
	var bad []string
	for _, s := range snaps {
		keys := make([]string, 0, len(s.Pending)+len(s.Outbox))
		for _, p := range s.Pending {
			keys = append(keys, hongbao.SendKey(p.Packet))
		}
		for _, o := range s.Outbox {
			keys = append(keys, o.Key)
		}
		have, err := ws.Entries(ctx, keys)
		if err != nil {
			return fl, nil, err
		}
		for _, p := range s.Pending {
			if en, ok := have[hongbao.SendKey(p.Packet)]; ok && en.Kind == hongbao.KindSend {
				fl.pendingPaid += p.Total
			}
		}
		for _, o := range s.Outbox {
			en, ok := have[o.Key]
			if !ok {
				continue
			}
			if en.Amount != o.Amount || en.Kind != o.Kind {
				bad = append(bad, fmt.Sprintf("outbox entry %s (%s %d) is in the ledger as %s %d", o.Key, o.Kind, o.Amount, en.Kind, en.Amount))
			}
			fl.deliveredN++
			fl.deliveredKeys[o.Key] = true
			switch o.Kind {
			case hongbao.KindOpen:
				fl.delivered.Credits += o.Amount
				fl.delivered.CreditsN++
			case hongbao.KindRefund:
				fl.delivered.Refunds += o.Amount
			}
		}
	}
	recent, err := ws.Since(ctx, last)
	if err != nil {
		return fl, nil, err
	}
	fl.recent = recent
	if len(recent) == 0 {
		return fl, bad, nil
	}
	keys := make([]string, len(recent))
	for i, en := range recent {
		keys[i] = en.Key
	}
	inSnap, err := anySources(ctx, snaps, keys, (*store.Snapshot).Sources)
	if err != nil {
		return fl, nil, err
	}
	var lateKeys []string
	for _, k := range keys {
		if !inSnap[k] {
			lateKeys = append(lateKeys, k)
		}
	}
	now, err := anySources(ctx, snaps, lateKeys, (*store.Snapshot).SourcesNow)
	if err != nil {
		return fl, nil, err
	}
	for _, en := range recent {
		if inSnap[en.Key] {
			continue
		}
		if !now[en.Key] {
			bad = append(bad, fmt.Sprintf("ledger entry %s (seq %d, %d fen) has no packet or share in any SET", en.Key, en.Seq, en.Amount))
			continue // counted, so that the sums show it too
		}
		fl.lateN++
		fl.lateKeys[en.Key] = true
		switch en.Kind {
		case hongbao.KindSend:
			fl.late.Debits -= en.Amount
		case hongbao.KindOpen:
			fl.late.Credits += en.Amount
			fl.late.CreditsN++
		case hongbao.KindRefund:
			fl.late.Refunds += en.Amount
		}
	}
	return fl, bad, nil
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

// openSetDBs opens pools on a SET's MySQL and its archive (one pool when
// they are the same).
func openSetDBs(dsn, coldDSN string) (db, cold *sql.DB, closeAll func(), err error) {
	if db, err = sqldb.Open(dsn, 4); err != nil {
		return nil, nil, nil, err
	}
	if coldDSN == dsn {
		return db, db, func() { db.Close() }, nil
	}
	if cold, err = sqldb.Open(coldDSN, 2); err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return db, cold, func() { db.Close(); cold.Close() }, nil
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

// setOrphans is one SET as verify read it: its pool, its snapshot and the
// orphans found in it.
type setOrphans struct {
	sc      configs.Set
	db      *sql.DB
	loc     *time.Location
	snap    *store.Snapshot
	orphans []store.Orphan
}

// readSets opens every SET's pools and snapshot (openSnapshots: each
// bucket counted in one of them, appending what closes them to closers),
// and returns the snapshots, their violations (of invariants 1 and 2, and
// an orphan is one) and the SETs with orphans expired before before.
func readSets(ctx context.Context, e *env, cfg *configs.Config, sets []configs.Set, before time.Time,
	closers *[]func()) (snaps []*store.Snapshot, bad []string, lost []setOrphans, err error) {
	pools := make([]setPools, len(sets))
	for i, sc := range sets {
		db, cold, closeDBs, err := openSetDBs(sc.MySQLDSN, sc.Cold())
		if err != nil {
			return nil, nil, nil, fmt.Errorf("SET %s: %w", sc.Name, err)
		}
		*closers = append(*closers, closeDBs)
		// A fleet with a topology: each SET counts the buckets assign
		// gives it, so a SET sharing a MySQL, a move's copy on its target
		// or a source's copy in its grace period is counted once.
		pools[i] = setPools{set: sc.Name, name: sc.Name, db: db, cold: cold}
		if cfg.MetaDSN == "" {
			pools[i].name = ""
		}
	}
	var meta *sql.DB
	if cfg.MetaDSN != "" {
		if meta, err = topology.OpenMeta(ctx, cfg.MetaDSN, cfg.CoreMembers(), false); err != nil {
			return nil, nil, nil, err
		}
		defer meta.Close()
	}
	if snaps, bad, err = openSnapshots(ctx, e, meta, pools, cfg.Location()); err != nil {
		return nil, nil, nil, err
	}
	*closers = append(*closers, func() { closeAll(snaps) })
	for i, sc := range sets {
		r := setOrphans{sc: sc, db: pools[i].db, loc: cfg.Location(), snap: snaps[i]}
		if err := readSet(ctx, e, &r, before); err != nil {
			return nil, nil, nil, fmt.Errorf("SET %s: %w", sc.Name, err)
		}
		bad = append(bad, r.snap.Bad...)
		for _, o := range r.orphans {
			bad = append(bad, fmt.Sprintf("SET %s: %s", sc.Name, o))
		}
		if len(r.orphans) > 0 {
			lost = append(lost, r)
		}
	}
	return snaps, bad, lost, nil
}

// readSet prints SET r's totals and lists its orphans expired before
// before.
func readSet(ctx context.Context, e *env, r *setOrphans, before time.Time) error {
	t := r.snap.Totals
	fmt.Fprintf(e.stdout, "SET %s: %d funded packets, %d shares, %d fen held, %d fen in outbox: invariants 1 and 2 checked\n",
		r.sc.Name, t.Packets, t.Details, t.Held, t.OutboxOpen+t.OutboxRef)
	var err error
	if r.orphans, err = r.snap.Orphans(ctx, before); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "SET %s: %d orphan packets (expired before %s, not settled, without the mark that settles them)\n",
		r.sc.Name, len(r.orphans), before.UTC().Format(time.RFC3339))
	return nil
}

// restoreMarks writes back the orphans' marks, one transaction per SET,
// and says what it did for each.
func restoreMarks(ctx context.Context, e *env, lost []setOrphans) error {
	for _, r := range lost {
		st := store.New(r.db, r.sc.Name, r.loc, time.Now, nil)
		done, err := st.RestoreMarks(ctx, r.orphans)
		if err != nil {
			return fmt.Errorf("SET %s: %w", r.sc.Name, err)
		}
		for _, d := range done {
			switch {
			case d.Skipped != "":
				fmt.Fprintf(e.stdout, "SET %s: packet %d: no mark written: %s\n", r.sc.Name, d.Packet, d.Skipped)
			default:
				fmt.Fprintf(e.stdout, "SET %s: packet %d: restored its %s: the settler settles it\n", r.sc.Name, d.Packet, marks(d))
			}
		}
	}
	return nil
}

// marks names the marks d wrote.
func marks(d store.Restored) string {
	switch {
	case d.Expiry && d.Pending:
		return "expiry and pending marks"
	case d.Pending:
		return "pending mark"
	}
	return "expiry mark"
}
