package wallet_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// topUp credits user amount fen under a fresh key.
func topUp(t *testing.T, w *wallet.Wallet, user hongbao.UserID, amount int64) {
	t.Helper()
	if _, _, err := w.Apply(context.Background(), hongbao.Entry{Key: fmt.Sprintf("topup:test:%d:%d", user, time.Now().UnixNano()),
		User: user, Amount: amount, Kind: hongbao.KindTopUp}); err != nil {
		t.Fatal(err)
	}
}

// debit is a send's debit of total for packet id.
func debit(user hongbao.UserID, id hongbao.PacketID, total int64) hongbao.Entry {
	return hongbao.Entry{Key: hongbao.SendKey(id), User: user, Amount: -total, Kind: hongbao.KindSend, Packet: id}
}

// limitOf returns err's LimitError, failing the test when it is not one.
func limitOf(t *testing.T, err error) *hongbao.LimitError {
	t.Helper()
	var le *hongbao.LimitError
	if !errors.As(err, &le) || hongbao.Code(err) != "daily_limit" {
		t.Fatalf("err = %v, want a daily_limit", err)
	}
	return le
}

// TestDailySendRace: two sends of one user at once, each within the daily
// total alone, both over it together: exactly one is debited, the other
// refused with the limit and its reset, and nothing of it recorded.
func TestDailySendRace(t *testing.T) {
	ctx := context.Background()
	shanghai := dbtest.Shanghai(t)
	w := openWallet(t).WithDaily(hongbao.DailyLimits{SendTotal: 1000}, shanghai)
	ends := hongbao.DayOf(time.Now(), shanghai).Ends
	for round := range 20 {
		user := dbtest.FreshUser()
		topUp(t, w, user, 10000)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() {
				_, _, errs[i] = w.Apply(ctx, debit(user, hongbao.PacketID(int64(round)*10+int64(i)+1), 600))
			})
		}
		wg.Wait()
		var passed, refused int
		for _, err := range errs {
			if err == nil {
				passed++
				continue
			}
			le := limitOf(t, err)
			if le.Name != hongbao.LimitSendTotal || le.Value != 1000 || !le.ResetsAt.Equal(ends) {
				t.Errorf("round %d: refusal %+v, want daily_send_total 1000 resetting at %s", round, le, ends)
			}
			refused++
		}
		if passed != 1 || refused != 1 {
			t.Fatalf("round %d: %d sends passed, %d refused (%v); want exactly one each", round, passed, refused, errs)
		}
		if b, err := w.Balance(ctx, user); err != nil || b != 9400 {
			t.Fatalf("round %d: balance %d, %v; want 9400 (one debit of 600)", round, b, err)
		}
		if _, _, u, err := w.Limits(ctx, user); err != nil || u != (hongbao.DailyUsage{SendCount: 1, SendTotal: 600}) {
			t.Fatalf("round %d: usage %+v, %v; want the one send", round, u, err)
		}
	}
}

// TestDailySendCountAndOverride: the count limit refuses the third send of
// the day; an operator's override raises it for one user; clearing it
// brings the configured limit back.
func TestDailySendCountAndOverride(t *testing.T) {
	ctx := context.Background()
	w := openWallet(t).WithDaily(hongbao.DailyLimits{SendCount: 2, SendTotal: 5000}, time.UTC)
	user := dbtest.FreshUser()
	topUp(t, w, user, 100000)
	for i := range 2 {
		if _, _, err := w.Apply(ctx, debit(user, hongbao.PacketID(i+1), 100)); err != nil {
			t.Fatalf("send %d: %v", i+1, err)
		}
	}
	_, _, err := w.Apply(ctx, debit(user, 3, 100))
	if le := limitOf(t, err); le.Name != hongbao.LimitSendCount || le.Value != 2 {
		t.Fatalf("third send: %+v, want daily_send_count 2", le)
	}
	if _, ok, err := w.Entry(ctx, hongbao.SendKey(3)); ok || err != nil {
		t.Fatalf("the refused send left a ledger entry (%v, %v)", ok, err)
	}
	if err := w.CheckSend(ctx, user, 100); err == nil {
		t.Fatal("CheckSend of a third send passed")
	}
	n, total := int64(10), int64(500000)
	if err := w.SetLimits(ctx, user, hongbao.LimitOverride{SendCount: &n, SendTotal: &total}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Apply(ctx, debit(user, 3, 20000)); err != nil {
		t.Fatalf("send after the override: %v", err)
	}
	o, l, u, err := w.Limits(ctx, user)
	if err != nil || *o.SendCount != 10 || *o.SendTotal != 500000 || o.ReceiveTotal != nil ||
		l != (hongbao.DailyLimits{SendCount: 10, SendTotal: 500000}) || u != (hongbao.DailyUsage{SendCount: 3, SendTotal: 20200}) {
		t.Fatalf("Limits = %+v %+v %+v, %v", o, l, u, err)
	}
	// A second set changes only what it names.
	zero := int64(0)
	if err := w.SetLimits(ctx, user, hongbao.LimitOverride{SendCount: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, l, _, _ := w.Limits(ctx, user); l != (hongbao.DailyLimits{SendCount: 0, SendTotal: 500000}) {
		t.Fatalf("after setting the count to none: %+v", l)
	}
	if err := w.ClearLimits(ctx, user); err != nil {
		t.Fatal(err)
	}
	_, _, err = w.Apply(ctx, debit(user, 4, 100))
	if le := limitOf(t, err); le.Name != hongbao.LimitSendCount {
		t.Fatalf("after clear: %+v, want the configured count again", le)
	}
}

// TestDailyResetsAtMidnight: usage is kept per day of the cluster's time
// zone, so a send one second after midnight there counts from zero.
func TestDailyResetsAtMidnight(t *testing.T) {
	ctx := context.Background()
	shanghai := dbtest.Shanghai(t)
	now := time.Date(2026, 11, 26, 15, 59, 59, 0, time.UTC) // 23:59:59 in Shanghai
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	w := openWalletAt(t, clock)
	w.WithDaily(hongbao.DailyLimits{SendCount: 1}, shanghai)
	user := dbtest.FreshUser()
	topUp(t, w, user, 1000)
	if _, _, err := w.Apply(ctx, debit(user, 1, 100)); err != nil {
		t.Fatal(err)
	}
	_, _, err := w.Apply(ctx, debit(user, 2, 100))
	if le := limitOf(t, err); !le.ResetsAt.Equal(time.Date(2026, 11, 26, 16, 0, 0, 0, time.UTC)) {
		t.Fatalf("resets at %s, want Shanghai's next midnight 16:00 UTC", le.ResetsAt)
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	if _, _, err := w.Apply(ctx, debit(user, 2, 100)); err != nil {
		t.Fatalf("the first send of the next day: %v", err)
	}
}

// TestReserveReceiveRace: two opens of one user at once, each within the
// receive limit alone: exactly one holds; settling gives back what its
// open did not take.
func TestReserveReceiveRace(t *testing.T) {
	ctx := context.Background()
	w := openWallet(t).WithDaily(hongbao.DailyLimits{ReceiveTotal: 1000}, time.UTC)
	user := dbtest.FreshUser()
	rs := make([]wallet.Reservation, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range rs {
		wg.Go(func() { rs[i], errs[i] = w.ReserveReceive(ctx, user, 600) })
	}
	wg.Wait()
	held := 0
	for i, err := range errs {
		if err == nil {
			held = i
			continue
		}
		if le := limitOf(t, err); le.Name != hongbao.LimitReceiveTotal || le.Value != 1000 {
			t.Fatalf("refusal %+v", le)
		}
	}
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("errs %v: want exactly one reservation", errs)
	}
	if err := w.Settle(ctx, rs[held], 250); err != nil {
		t.Fatal(err)
	}
	if _, _, u, _ := w.Limits(ctx, user); u.ReceiveTotal != 250 {
		t.Fatalf("received %d after settling a share of 250, want 250", u.ReceiveTotal)
	}
	if _, err := w.ReserveReceive(ctx, user, 751); err == nil {
		t.Fatal("a hold of 751 over 250 received passed a limit of 1000")
	}
	if _, err := w.ReserveReceive(ctx, user, 750); err != nil {
		t.Fatalf("a hold of exactly what is left: %v", err)
	}
}
