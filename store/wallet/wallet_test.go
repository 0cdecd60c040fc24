package wallet_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// openWallet opens a wallet in a database of its own on test SET a's
// MariaDB, dropped when the test ends.
func openWallet(t *testing.T) *wallet.Wallet { t.Helper(); return openWalletAt(t, time.Now) }

// openWalletAt is openWallet on the clock now.
func openWalletAt(t *testing.T, now func() time.Time) *wallet.Wallet {
	t.Helper()
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName("hb_wallet_test_")
	ctx := context.Background()
	w, err := wallet.Open(ctx, cfg.FormatDSN(), nil, 8, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = w.DB().ExecContext(context.Background(), "DROP DATABASE `"+cfg.DBName+"`")
		w.Close()
	})
	return w
}

func TestApplyIsExactlyOnce(t *testing.T) {
	ctx := context.Background()
	w := openWallet(t)
	user := dbtest.FreshUser()
	e := hongbao.Entry{Key: hongbao.OpenKey(1, user), User: user, Amount: 250, Kind: hongbao.KindOpen, Packet: 1}
	first, fresh, err := w.Apply(ctx, e)
	if err != nil || !fresh || first.Seq == 0 {
		t.Fatalf("first Apply = %+v, fresh %v, %v", first, fresh, err)
	}
	// Re-delivery of the same key moves nothing and answers the first entry,
	// even with another amount (a key names one movement, for ever).
	again := e
	again.Amount = 999
	got, fresh, err := w.Apply(ctx, again)
	if err != nil || fresh || got.Seq != first.Seq || got.Amount != 250 {
		t.Fatalf("second Apply = %+v, fresh %v, %v; want the first entry, not fresh", got, fresh, err)
	}
	if b, err := w.Balance(ctx, user); err != nil || b != 250 {
		t.Fatalf("balance %d, %v; want 250", b, err)
	}
}

func TestApplyConcurrentRedeliveries(t *testing.T) {
	ctx := context.Background()
	w := openWallet(t)
	user := dbtest.FreshUser()
	e := hongbao.Entry{Key: hongbao.OpenKey(2, user), User: user, Amount: 7, Kind: hongbao.KindOpen, Packet: 2}
	var wg sync.WaitGroup
	var mu sync.Mutex
	fresh := 0
	for range 16 {
		wg.Go(func() {
			_, f, err := w.Apply(ctx, e)
			if err != nil {
				t.Error(err)
			}
			if f {
				mu.Lock()
				fresh++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if b, _ := w.Balance(ctx, user); fresh != 1 || b != 7 {
		t.Errorf("%d fresh applies, balance %d; want exactly 1 and 7", fresh, b)
	}
}

func TestDebitNeverOverdraws(t *testing.T) {
	ctx := context.Background()
	w := openWallet(t)
	user := dbtest.FreshUser()
	if _, _, err := w.Apply(ctx, hongbao.Entry{Key: dbtest.UniqueName("topup:"), User: user, Amount: 100, Kind: hongbao.KindTopUp}); err != nil {
		t.Fatal(err)
	}
	_, _, err := w.Apply(ctx, hongbao.Entry{Key: hongbao.SendKey(3), User: user, Amount: -101, Kind: hongbao.KindSend, Packet: 3})
	if !errors.Is(err, hongbao.ErrInsufficientFunds) {
		t.Fatalf("debit of 101 from 100 = %v, want ErrInsufficientFunds", err)
	}
	// A refused debit records nothing: its key stays free.
	if _, ok, err := w.Entry(ctx, hongbao.SendKey(3)); ok || err != nil {
		t.Fatalf("entry of the refused debit: %v, %v; want none", ok, err)
	}
	if _, fresh, err := w.Apply(ctx, hongbao.Entry{Key: hongbao.SendKey(3), User: user, Amount: -100, Kind: hongbao.KindSend, Packet: 3}); err != nil || !fresh {
		t.Fatalf("debit of 100 from 100 = %v, fresh %v", err, fresh)
	}
	if b, _ := w.Balance(ctx, user); b != 0 {
		t.Errorf("balance %d, want 0", b)
	}
}

func TestHistoryPagesNewestFirst(t *testing.T) {
	ctx := context.Background()
	w := openWallet(t)
	user := dbtest.FreshUser()
	for p := range 5 {
		id := hongbao.PacketID(100 + p)
		if _, _, err := w.Apply(ctx, hongbao.Entry{Key: hongbao.OpenKey(id, user), User: user, Amount: int64(10 + p), Kind: hongbao.KindOpen, Packet: id}); err != nil {
			t.Fatal(err)
		}
	}
	// Another kind is not listed with the opens.
	if _, _, err := w.Apply(ctx, hongbao.Entry{Key: dbtest.UniqueName("topup:"), User: user, Amount: 1, Kind: hongbao.KindTopUp}); err != nil {
		t.Fatal(err)
	}
	var got []int64
	cursor := int64(0)
	for pages := 0; ; pages++ {
		es, next, err := w.History(ctx, user, hongbao.KindOpen, cursor, 2)
		if err != nil || pages > 3 {
			t.Fatalf("page %d: %v", pages, err)
		}
		for _, e := range es {
			got = append(got, e.Amount)
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	if want := []int64{14, 13, 12, 11, 10}; !slices.Equal(got, want) {
		t.Errorf("history %v, want %v", got, want)
	}
}

func TestVerifyFindsATamperedBalance(t *testing.T) {
	ctx := context.Background()
	w := openWallet(t)
	a, b := dbtest.FreshUser(), dbtest.FreshUser()
	for _, e := range []hongbao.Entry{
		{Key: dbtest.UniqueName("topup:"), User: a, Amount: 500, Kind: hongbao.KindTopUp},
		{Key: hongbao.SendKey(9), User: a, Amount: -300, Kind: hongbao.KindSend, Packet: 9},
		{Key: hongbao.OpenKey(9, b), User: b, Amount: 200, Kind: hongbao.KindOpen, Packet: 9},
		{Key: hongbao.RefundKey(9), User: a, Amount: 100, Kind: hongbao.KindRefund, Packet: 9},
	} {
		if _, _, err := w.Apply(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	tot, bad, err := w.Verify(ctx)
	if err != nil || len(bad) != 0 {
		t.Fatalf("Verify: %v, %v", bad, err)
	}
	if want := (wallet.Totals{Debits: 300, Credits: 200, CreditsN: 1, Refunds: 100, TopUps: 500}); tot != want {
		t.Errorf("totals %+v, want %+v", tot, want)
	}
	if _, err := w.DB().ExecContext(ctx, "UPDATE accounts SET balance = balance + 1 WHERE user_id = ?", b); err != nil {
		t.Fatal(err)
	}
	_, bad, err = w.Verify(ctx)
	if err != nil || len(bad) != 1 || !strings.Contains(bad[0], "balance 201 != ledger sum 200") {
		t.Errorf("Verify after tampering = %q, %v; want user %s's balance 201 != ledger sum 200", bad, err, b)
	}
}

// TestTopUp: an operator's top-up credits the user once per key (entry
// "topup:"+key, kind topup); the same key again moves nothing; an empty
// key is a new one each time.
func TestTopUp(t *testing.T) {
	w := openWallet(t)
	ctx := context.Background()
	u := dbtest.FreshUser()
	key, fresh, err := w.TopUp(ctx, u, 500, "k1")
	if err != nil || !fresh || key != "k1" {
		t.Fatalf("first top-up: key %q fresh %v err %v", key, fresh, err)
	}
	if _, fresh, err := w.TopUp(ctx, u, 500, "k1"); err != nil || fresh {
		t.Fatalf("the same key again: fresh %v err %v, want nothing moved", fresh, err)
	}
	en, ok, err := w.Entry(ctx, "topup:k1")
	if err != nil || !ok || en.Kind != hongbao.KindTopUp || en.Amount != 500 || en.User != u {
		t.Fatalf("entry topup:k1: %+v %v %v", en, ok, err)
	}
	a, _, err := w.TopUp(ctx, u, 7, "")
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := w.TopUp(ctx, u, 7, "")
	if err != nil || a == "" || a == b {
		t.Fatalf("new keys %q and %q (err %v): want two different ones", a, b, err)
	}
	if bal, err := w.Balance(ctx, u); err != nil || bal != 514 {
		t.Fatalf("balance %d (err %v), want 514", bal, err)
	}
}
