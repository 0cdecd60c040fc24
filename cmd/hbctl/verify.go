package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/set/settings"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/audit"
)

// cmdVerify runs the money audit (store/audit: invariants 1, 2 and 4
// across every SET and the wallet, on a quiet or a live system, and the
// orphan packets) and prints its report. --restore-marks writes back the
// marks the orphans lack, and the settlers then settle them.
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
		defer func() { err = errors.Join(err, metrics.RecordVerify(*textfile, err == nil, time.Now())) }()
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
	src, closeAll, err := settings.Audit(ctx, cfg)
	defer closeAll()
	if err != nil {
		return err
	}
	src.Wallet = w
	rep, err := audit.Run(ctx, src, audit.Options{OrphansBefore: before, Retry: func(unsettled []hongbao.Bucket) {
		fmt.Fprintf(e.stdout, "%d bucket(s) (%v) handed over while the snapshots opened: opening them again\n",
			len(unsettled), unsettled[:min(len(unsettled), 10)])
	}})
	printReport(e.stdout, rep, err == nil)
	if err != nil {
		return err
	}
	bad := rep.Violations()
	if *restore {
		if err := restoreMarks(ctx, e.stdout, src, rep); err != nil {
			return err
		}
	}
	if len(bad) > 0 {
		return errors.New(fmt.Sprint(len(bad), " violation(s)"))
	}
	fmt.Fprintln(e.stdout, "OK: every invariant holds")
	return nil
}

// printReport prints what the audit read; the sums and the violations
// only when it completed.
func printReport(out io.Writer, rep *audit.Report, done bool) {
	for _, s := range rep.Sets {
		t := s.Totals
		fmt.Fprintf(out, "SET %s: %d funded packets, %d shares, %d fen held, %d fen in outbox: invariants 1 and 2 checked\n",
			s.Name, t.Packets, t.Details, t.Held, t.OutboxOpen+t.OutboxRef)
		if s.Checked {
			fmt.Fprintf(out, "SET %s: %d orphan packets (expired before %s, not settled, without the mark that settles them)\n",
				s.Name, len(s.Orphans), rep.OrphansBefore.UTC().Format(time.RFC3339))
		}
	}
	if wt := rep.Wallet; wt != nil {
		fmt.Fprintf(out, "wallet: debits %d, credits %d (%d), refunds %d, top-ups %d: balances checked against the ledger\n",
			wt.Debits, wt.Credits, wt.CreditsN, wt.Refunds, wt.TopUps)
	}
	if fl := rep.Flight; fl != nil {
		fmt.Fprintf(out, "in flight: %d outbox entries already in the ledger (%d fen, counted once), %d ledger entries written after the SETs were read (debits %d, credits %d, refunds %d: not counted)\n",
			fl.DeliveredN, fl.Delivered.Credits+fl.Delivered.Refunds, fl.LateN, fl.Late.Debits, fl.Late.Credits, fl.Late.Refunds)
	}
	if !done {
		return
	}
	wt, sum := rep.Counted, rep.Sums
	fmt.Fprintf(out, "invariant 4: debits %d == credits %d + refunds %d + held %d + pending paid %d + outbox %d\n",
		wt.Debits, wt.Credits, wt.Refunds, sum.Held, sum.PendingPaid, sum.OutboxOpen+sum.OutboxRef)
	for _, v := range rep.Violations() {
		fmt.Fprintln(out, "VIOLATION:", v)
	}
}

// restoreMarks writes back the orphans' marks, one transaction per SET,
// and says what it did for each.
func restoreMarks(ctx context.Context, out io.Writer, src audit.Sources, rep *audit.Report) error {
	for i, s := range rep.Sets {
		if len(s.Orphans) == 0 {
			continue
		}
		done, err := audit.RestoreMarks(ctx, src.Sets[i], src.Location, s.Orphans)
		if err != nil {
			return err
		}
		for _, d := range done {
			switch {
			case d.Skipped != "":
				fmt.Fprintf(out, "SET %s: packet %d: no mark written: %s\n", s.Name, d.Packet, d.Skipped)
			default:
				fmt.Fprintf(out, "SET %s: packet %d: restored its %s: the settler settles it\n", s.Name, d.Packet, marks(d))
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
