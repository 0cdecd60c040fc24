package set_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// dailyWallet opens a wallet of its own with daily limits l over
// Shanghai's days, dropped when the test ends.
func dailyWallet(t *testing.T, l hongbao.DailyLimits) *wallet.Wallet {
	t.Helper()
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName("hb_wallet_daily_")
	w, err := wallet.Open(context.Background(), cfg.FormatDSN(), nil, 16, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = w.DB().ExecContext(context.Background(), "DROP DATABASE `"+cfg.DBName+"`")
		w.Close()
	})
	return w.WithDaily(l, dbtest.Shanghai(t))
}

func credit(t *testing.T, w *wallet.Wallet, u hongbao.UserID, amount int64) {
	t.Helper()
	if _, _, err := w.Apply(context.Background(), hongbao.Entry{Key: fmt.Sprintf("topup:t:%d:%d", u, time.Now().UnixNano()),
		User: u, Amount: amount, Kind: hongbao.KindTopUp}); err != nil {
		t.Fatal(err)
	}
}

// limitProblem checks r is 403 daily_limit naming limit name of value,
// resetting at Shanghai's next midnight.
func limitProblem(t *testing.T, what string, r reply, name string, value int64) {
	t.Helper()
	l, _ := r.JSON["limit"].(map[string]any)
	ends := hongbao.DayOf(time.Now(), dbtest.Shanghai(t)).Ends.Format("2006-01-02T15:04:05.000Z07:00")
	if !r.IsProblem(http.StatusForbidden, "daily_limit") || l["name"] != name || fmt.Sprint(l["value"]) != fmt.Sprint(value) || l["resets_at"] != ends {
		t.Errorf("%s: %v, want 403 daily_limit %s %d resetting at %s", what, r, name, value, ends)
	}
}

// TestDailySendLimitRace: two sends of one user at once over the daily
// total: exactly one is created and debited, the other answered 403
// daily_limit with the limit and its reset, every round; then the send that
// fits the rest exactly passes and one fen more does not.
func TestDailySendLimitRace(t *testing.T) {
	w := dailyWallet(t, hongbao.DailyLimits{SendTotal: 1000})
	h := newHarness(t, harnessOpts{Wallet: w})
	ctx := context.Background()
	for round := range 10 {
		sender := dbtest.FreshUser()
		credit(t, w, sender, 10000)
		answers := make([]reply, 2)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() { answers[i] = h.send(sender, map[string]any{"total": 600, "count": 3}, "") })
		}
		wg.Wait()
		created := 0
		var refused []reply
		for _, r := range answers {
			if r.Status == http.StatusCreated {
				created++
			} else {
				refused = append(refused, r)
			}
		}
		if created != 1 || len(refused) != 1 {
			t.Fatalf("round %d: answers %v, want exactly one 201", round, answers)
		}
		limitProblem(t, fmt.Sprintf("round %d", round), refused[0], "daily_send_total", 1000)
		if b, err := w.Balance(ctx, sender); err != nil || b != 9400 {
			t.Fatalf("round %d: balance %d, %v; want 9400", round, b, err)
		}
		if r := h.send(sender, map[string]any{"total": 400, "count": 4}, ""); r.Status != http.StatusCreated {
			t.Fatalf("round %d: the send reaching the limit exactly: %v", round, r)
		}
		limitProblem(t, "one fen over", h.send(sender, map[string]any{"total": 1, "count": 1}, ""), "daily_send_total", 1000)
		if b, _ := w.Balance(ctx, sender); b != 9000 {
			t.Fatalf("round %d: balance %d, want 9000", round, b)
		}
	}
}

// TestDailySendCountKeyed: a keyed send refused by the count limit is
// cancelled (its debit never made), and its retry under the same key says
// daily_limit again, not insufficient_funds.
func TestDailySendCountKeyed(t *testing.T) {
	w := dailyWallet(t, hongbao.DailyLimits{SendCount: 1})
	h := newHarness(t, harnessOpts{Wallet: w})
	sender := dbtest.FreshUser()
	credit(t, w, sender, 1000)
	if r := h.send(sender, map[string]any{"total": 100, "count": 1}, "first"); r.Status != http.StatusCreated {
		t.Fatal(r)
	}
	limitProblem(t, "second send", h.send(sender, map[string]any{"total": 100, "count": 1}, "second"), "daily_send_count", 1)
	limitProblem(t, "second send again", h.send(sender, map[string]any{"total": 100, "count": 1}, "second"), "daily_send_count", 1)
	if b, _ := w.Balance(context.Background(), sender); b != 900 {
		t.Fatalf("balance %d, want 900: one debit", b)
	}
}

// TestDailyReceiveLimit: an open whose largest possible share would pass
// the opener's daily receive total is refused before anything is drawn (the
// share stays for someone else); two such opens at once: exactly one opens.
func TestDailyReceiveLimit(t *testing.T) {
	w := dailyWallet(t, hongbao.DailyLimits{ReceiveTotal: 1000})
	h := newHarness(t, harnessOpts{Wallet: w})
	send := func() string {
		s := dbtest.FreshUser()
		credit(t, w, s, 600)
		r := h.send(s, map[string]any{"total": 600, "count": 1, "type": "fixed"}, "")
		if r.Status != http.StatusCreated {
			t.Fatal(r)
		}
		return r.Str("id")
	}
	user := dbtest.FreshUser()
	a, b := send(), send()
	if r, _ := h.openFinal(user, a); r.Status != http.StatusOK || r.Amount() != 600 {
		t.Fatalf("first open: %v, want opened 600", r)
	}
	r, _ := h.openFinal(user, b)
	limitProblem(t, "second open", r, "daily_receive_total", 1000)
	if r, _ := h.openFinal(dbtest.FreshUser(), b); r.Status != http.StatusOK || r.Amount() != 600 {
		t.Fatalf("someone else's open of the refused share: %v", r)
	}
	if _, _, u, _ := w.Limits(context.Background(), user); u.ReceiveTotal != 600 {
		t.Fatalf("received today %d, want 600: the refused hold and the settled one leave nothing over", u.ReceiveTotal)
	}
	for round := range 10 {
		user := dbtest.FreshUser()
		ids := []string{send(), send()}
		answers := make([]reply, 2)
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() { answers[i], _ = h.openFinal(user, id) })
		}
		wg.Wait()
		opened := 0
		for _, r := range answers {
			switch {
			case r.Status == http.StatusOK && r.Str("status") == hongbao.Opened && r.Amount() == 600:
				opened++
			case r.IsProblem(http.StatusForbidden, "daily_limit"):
			default:
				t.Fatalf("round %d: %v", round, r)
			}
		}
		if opened != 1 {
			t.Fatalf("round %d: %d opens passed a receive limit with room for one: %v", round, opened, answers)
		}
	}
}

// TestAudienceWithWallet: a funded send (pending, debited, then funded)
// keeps its audience: the sender's answer shows it and a stranger is
// refused, from memory as through the transaction.
func TestAudienceWithWallet(t *testing.T) {
	w := dailyWallet(t, hongbao.DailyLimits{})
	h := newHarness(t, harnessOpts{Wallet: w})
	other := newHarness(t, harnessOpts{Set: h.set, Wallet: w, Memcached: "127.0.0.1:1"})
	sender, member, stranger := dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
	credit(t, w, sender, 1000)
	r := h.send(sender, map[string]any{"total": 500, "count": 1, "audience": map[string]any{"users": []string{member.String()}}}, "")
	if a := audienceOf(t, r); r.Status != http.StatusCreated || a == nil || len(a.Users) != 1 || a.Users[0] != member.String() {
		t.Fatalf("send: %v, want 201 showing the audience", r)
	}
	id := r.Str("id")
	for name, hs := range map[string]*harness{"the sending server": h, "another server": other} {
		if r, _ := hs.openFinal(stranger, id); !r.IsProblem(http.StatusForbidden, "not_in_audience") {
			t.Errorf("stranger on %s: %v, want 403 not_in_audience", name, r)
		}
	}
	if r, _ := h.openFinal(member, id); r.Status != http.StatusOK || r.Amount() != 500 {
		t.Errorf("member: %v, want opened 500", r)
	}
}

// TestDailyOverrideOnly: with no limit configured, one user's override
// (hbctl limits set) still refuses their send past it, at the debit.
func TestDailyOverrideOnly(t *testing.T) {
	w := dailyWallet(t, hongbao.DailyLimits{})
	h := newHarness(t, harnessOpts{Wallet: w})
	limited, free := dbtest.FreshUser(), dbtest.FreshUser()
	total := int64(300)
	if err := w.SetLimits(context.Background(), limited, hongbao.LimitOverride{SendTotal: &total}); err != nil {
		t.Fatal(err)
	}
	for _, u := range []hongbao.UserID{limited, free} {
		credit(t, w, u, 1000)
		if r := h.send(u, map[string]any{"total": 300, "count": 3}, ""); r.Status != http.StatusCreated {
			t.Fatalf("first send of %s: %v", u, r)
		}
	}
	limitProblem(t, "the limited user's second send", h.send(limited, map[string]any{"total": 1, "count": 1}, ""), "daily_send_total", 300)
	if r := h.send(free, map[string]any{"total": 700, "count": 7}, ""); r.Status != http.StatusCreated {
		t.Errorf("the other user's second send: %v", r)
	}
	if b, _ := w.Balance(context.Background(), limited); b != 700 {
		t.Errorf("the limited user's balance %d, want 700", b)
	}
}
