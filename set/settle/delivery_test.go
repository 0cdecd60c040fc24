package settle_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/settle"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// TestDuplicateDelivery delivers the same outbox entries twice at once,
// then again after putting them back into the outbox (a settler that
// crashed between the ledger write and the outbox delete), then once more
// by the real settler: each credit is in the ledger once and moved the
// balance once. An entry whose key is taken by a different entry is never
// applied and is reported by hbctl verify.
func TestDuplicateDelivery(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{ServersPerSet: 1})
	cl := c.Client.Retrying(10 * time.Second)
	const sender hongbao.UserID = 600
	users := []hongbao.UserID{601, 602, 603}
	c.TopUp(t, sender, 900)
	s := cl.Send(sender, hongbao.SendRequest{Total: 900, Count: 3, Type: hongbao.Fixed}, "dup")
	if s.Status != http.StatusCreated {
		t.Fatalf("send: %v", s)
	}
	id := mustID(t, s.Body.ID)
	owner, err := c.SetOf(id)
	if err != nil {
		t.Fatal(err)
	}
	db := c.DB(owner)

	// With the SET's settler down, the credits wait in the outbox.
	c.Kill(clustertest.Settler, owner)
	for _, u := range users {
		if r := cl.Open(u, s.Body.ID); r.Status != http.StatusOK || r.Body.Amount != 300 {
			t.Fatalf("open by %s: %v", u, r)
		}
	}
	if n := dbtest.Count(t, db, "SELECT COUNT(*) FROM hb_set.outbox WHERE packet_id = ?", id); n != 3 {
		t.Fatalf("outbox rows: %d, want 3", n)
	}

	ctx := t.Context()
	newSettler := func() *settle.Settler {
		sdb, err := sqldb.Open(c.Set(owner).DSN, 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sdb.Close() })
		w, err := wallet.Open(ctx, c.WalletDSN, nil, 4, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		loc := dbtest.Shanghai(t)
		return settle.New(store.New(sdb, owner, loc, time.Now, rand.Int64N), w, time.Now, zap.NewNop())
	}
	s1, s2 := newSettler(), newSettler()
	saved := outboxRows(t, db, id)

	checkOnce := func(when string) {
		t.Helper()
		for _, u := range users {
			if es := ledger(t, c, "entry_key = ?", hongbao.OpenKey(id, u)); len(es) != 1 || es[0].amount != 300 {
				t.Errorf("%s: ledger rows for %s: %+v, want one of 300", when, hongbao.OpenKey(id, u), es)
			}
			if got := balance(t, c, u); got != 300 {
				t.Errorf("%s: balance of %s: %d, want 300", when, u, got)
			}
		}
		if n := dbtest.Count(t, db, "SELECT COUNT(*) FROM hb_set.outbox"); n != 0 {
			t.Errorf("%s: %d rows left in the outbox", when, n)
		}
	}

	// Two settlers deliver the same rows at once.
	var wg sync.WaitGroup
	for _, st := range []*settle.Settler{s1, s2} {
		wg.Go(func() {
			if _, err := st.Deliver(ctx); err != nil {
				t.Errorf("deliver: %v", err)
			}
		})
	}
	wg.Wait()
	checkOnce("two settlers at once")

	// The rows come back, as after a crash before the outbox delete.
	putBack := func() {
		t.Helper()
		for _, r := range saved {
			r.put(t, db)
		}
	}
	putBack()
	if n, err := s1.Deliver(ctx); err != nil || n != 3 {
		t.Errorf("re-delivery: %d rows, %v; want 3 rows removed", n, err)
	}
	checkOnce("re-delivery")

	// And once more, by the real settler, restarted twice.
	putBack()
	c.Restart(clustertest.Settler, owner)
	c.Restart(clustertest.Settler, owner)
	waitSettled(t, c, false, 10*time.Second)
	checkOnce("re-delivery by hbsettler")
	if got := balance(t, c, sender); got != 0 {
		t.Errorf("sender's balance %d, want 0", got)
	}
	c.CheckInvariants(t)

	// A row whose key the ledger holds for a different entry stays in
	// the outbox, moves nothing, and verify names the violation.
	c.Kill(clustertest.Settler, owner)
	if _, err := db.Exec("INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at) VALUES (?,?,?,?,?,?)",
		hongbao.OpenKey(id, users[0]), users[0], 301, hongbao.KindOpen, id, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Deliver(ctx); err != nil {
		t.Fatalf("deliver of a conflicting row: %v", err)
	}
	if n := dbtest.Count(t, db, "SELECT COUNT(*) FROM hb_set.outbox"); n != 1 {
		t.Errorf("conflicting row: %d outbox rows, want it kept", n)
	}
	if got := balance(t, c, users[0]); got != 300 {
		t.Errorf("conflicting row moved money: balance %d, want 300", got)
	}
	out, err := c.Ctl("verify")
	if err == nil || !strings.Contains(out, "VIOLATION") {
		t.Errorf("hbctl verify with a conflicting outbox row: err %v, want non-zero exit naming a violation:\n%s", err, out)
	}
	var exit interface{ ExitCode() int }
	if errors.As(err, &exit) && exit.ExitCode() == 0 {
		t.Errorf("hbctl verify exit code 0 with a violation")
	}
	if _, err := db.Exec("DELETE FROM hb_set.outbox"); err != nil {
		t.Fatal(err)
	}
	c.CheckInvariants(t)
}

// TestConcurrentFirstCredits credits users who have no account yet, eight
// at a time, as hbctl wallet credit (an operator's top-ups) and the
// settlers (first credits to new openers) do: wallet.Wallet.Apply on the
// cluster's wallet. Every credit must be applied; none may fail because
// another user's account was being created at the same moment.
func TestConcurrentFirstCredits(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{ServersPerSet: 1})
	w, err := wallet.Open(t.Context(), c.WalletDSN, nil, 16, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var failed []string
	var mu sync.Mutex
	for round := range 5 {
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				u := hongbao.UserID(8000 + 10*round + i)
				_, _, err := w.Apply(t.Context(), hongbao.Entry{Key: fmt.Sprintf("topup:first-%s", u), User: u, Amount: 100, Kind: hongbao.KindTopUp})
				if err != nil {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("user %s: %v", u, err))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	if len(failed) > 0 {
		t.Errorf("%d of 40 first credits failed:\n%s", len(failed), strings.Join(failed, "\n"))
	}
	sums := ledgerSums(t, c)
	for round := range 5 {
		for i := range 8 {
			u := hongbao.UserID(8000 + 10*round + i)
			if got := balance(t, c, u); got != sums[u] {
				t.Errorf("user %s: balance %d, ledger sum %d", u, got, sums[u])
			}
		}
	}
	c.CheckInvariants(t)
}
