package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/cmd/internal/settings"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// cmdVerify checks invariants 1, 2 and 4 across every SET and the wallet.
// Run it on a quiet system (outbox drained): an entry being delivered at
// the moment of the check is briefly in both the outbox and the ledger.
func cmdVerify(ctx context.Context, e *env, args []string) (err error) {
	fs := flags("verify", e)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	textfile := fs.String("textfile", "", "also write the result as Prometheus metrics to this file (hongbao_verify_ok, for node_exporter's textfile collector)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *textfile != "" {
		defer func() { err = errors.Join(err, writeVerify(*textfile, err == nil)) }()
	}
	cfg, w, err := openWallet(ctx, e, *cfgPath)
	if err != nil {
		return err
	}
	defer w.Close()
	paid := func(packet int64) (bool, error) {
		en, ok, err := w.Entry(ctx, hongbao.SendKey(hongbao.PacketID(packet)))
		return ok && en.Kind == hongbao.KindSend, err
	}
	var sum store.SetTotals
	var bad []string
	sets, err := settings.Sets(ctx, cfg) // the meta database's, when there is one
	if err != nil {
		return err
	}
	for _, sc := range sets {
		var t store.SetTotals
		var b []string
		err := withDB(sc.MySQLDSN, func(db *sql.DB) error {
			return withDB(sc.Cold(), func(cold *sql.DB) error {
				var err error
				if cfg.MetaDSN == "" {
					t, b, err = store.VerifySet(ctx, db, cold, paid)
				} else {
					// A fleet with a topology: each SET counts the buckets its
					// fence holds, so a SET sharing a MySQL, a move's copy on
					// its target or a source's copy in its grace period is
					// counted once.
					t, b, err = store.VerifyOwned(ctx, db, cold, sc.Name, paid)
				}
				return err
			})
		})
		if err != nil {
			return fmt.Errorf("SET %s: %w", sc.Name, err)
		}
		fmt.Fprintf(e.stdout, "SET %s: %d funded packets, %d shares, %d fen held, %d fen in outbox: invariants 1 and 2 checked\n",
			sc.Name, t.Packets, t.Details, t.Held, t.OutboxOpen+t.OutboxRef)
		bad = append(bad, b...)
		sum = add(sum, t)
	}
	wt, b, err := w.Verify(ctx)
	if err != nil {
		return err
	}
	bad = append(bad, b...)
	fmt.Fprintf(e.stdout, "wallet: debits %d, credits %d (%d), refunds %d, top-ups %d: balances checked against the ledger\n",
		wt.Debits, wt.Credits, wt.CreditsN, wt.Refunds, wt.TopUps)
	bad = append(bad, money(wt, sum)...)
	fmt.Fprintf(e.stdout, "invariant 4: debits %d == credits %d + refunds %d + held %d + pending paid %d + outbox %d\n",
		wt.Debits, wt.Credits, wt.Refunds, sum.Held, sum.PendingPaid, sum.OutboxOpen+sum.OutboxRef)
	if len(bad) > 0 {
		for _, v := range bad {
			fmt.Fprintln(e.stdout, "VIOLATION:", v)
		}
		return errors.New(fmt.Sprint(len(bad), " violation(s)"))
	}
	fmt.Fprintln(e.stdout, "OK: every invariant holds")
	return nil
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
