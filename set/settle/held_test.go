package settle_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/metrics"
)

// TestDeliverSetsAsideWhatItCannotDeliver: outbox rows the ledger cannot
// hold (keys recorded for other amounts, a debit the wallet refuses) at
// the head of the outbox, more than one read holds, do not stop the
// credits behind them: each is set aside once read, the credits are
// delivered, the bad rows stay in the outbox, and after HoldFor they are
// read again.
func TestDeliverSetsAsideWhatItCannotDeliver(t *testing.T) {
	r := newBatchRig(t)
	ctx := t.Context()
	u, v := dbtest.FreshUser(), dbtest.FreshUser()
	var olds, bad []hongbao.Entry
	for i := range 3 {
		p := hongbao.PacketID(90 + i)
		old := hongbao.Entry{Key: hongbao.OpenKey(p, u), User: u, Amount: 100, Kind: hongbao.KindOpen, Packet: p}
		olds = append(olds, old)
		conflict := old
		conflict.Amount = 101
		bad = append(bad, conflict)
	}
	if _, err := r.w.Credit(ctx, olds); err != nil {
		t.Fatal(err)
	}
	// v has nothing: the wallet refuses this debit.
	bad = append(bad, hongbao.Entry{Key: hongbao.SendKey(95), User: v, Amount: -50, Kind: hongbao.KindSend, Packet: 95})
	good := []hongbao.Entry{
		{Key: hongbao.OpenKey(96, v), User: v, Amount: 7, Kind: hongbao.KindOpen, Packet: 96},
		{Key: hongbao.OpenKey(96, u), User: u, Amount: 8, Kind: hongbao.KindOpen, Packet: 96},
		{Key: hongbao.RefundKey(97), User: v, Amount: 9, Kind: hongbao.KindRefund, Packet: 97},
	}
	r.put(t, append(append([]hongbao.Entry{}, bad...), good...)) // the bad rows first: the head of every read

	s := r.settler(t, 1, 2) // reads 2 rows at a time: the bad rows fill two reads
	reg := prometheus.NewRegistry()
	s.Metrics = metrics.NewSettle(reg)
	sent := 0
	for range 8 {
		n, err := s.Deliver(ctx)
		if err != nil {
			t.Fatalf("Deliver: %v", err)
		}
		sent += n
	}
	if sent != len(good) {
		t.Errorf("delivered %d rows in 8 deliveries, want the %d good ones", sent, len(good))
	}
	if n := dbtest.Count(t, r.set, "SELECT COUNT(*) FROM hb_set.outbox"); n != len(bad) {
		t.Errorf("%d outbox rows left, want the %d bad ones", n, len(bad))
	}
	for _, e := range bad {
		if n := dbtest.Count(t, r.set, "SELECT COUNT(*) FROM hb_set.outbox WHERE entry_key = ? AND amount = ?", e.Key, e.Amount); n != 1 {
			t.Errorf("bad row %s (%d): %d in the outbox, want it kept", e.Key, e.Amount, n)
		}
	}
	checkLedger(t, r.w, append(olds, good...), map[hongbao.UserID]int64{u: 308, v: 16})
	if got := heldRows(t, reg); got != float64(len(bad)) {
		t.Errorf("hongbao_settle_held_rows = %v, want %d", got, len(bad))
	}

	// Past HoldFor the rows are read again, and set aside again.
	s.HoldFor = time.Nanosecond
	if n, err := s.Deliver(ctx); err != nil || n != 0 {
		t.Fatalf("Deliver past HoldFor = %d, %v; want 0 delivered", n, err)
	}
	if got := heldRows(t, reg); got != 2 {
		t.Errorf("hongbao_settle_held_rows after HoldFor = %v, want the 2 read again", got)
	}
	if n := dbtest.Count(t, r.set, "SELECT COUNT(*) FROM hb_set.outbox"); n != len(bad) {
		t.Errorf("%d outbox rows left after the retry, want %d", n, len(bad))
	}
}

// heldRows reads the settler's hongbao_settle_held_rows gauge.
func heldRows(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "hongbao_settle_held_rows" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no hongbao_settle_held_rows gauge")
	return 0
}
