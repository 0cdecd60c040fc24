package set_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"sync"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// memoStack is a harness whose server has a store pool of its own and a
// private memcached, so a test can take both away from this server alone.
type memoStack struct {
	*harness
	storeDB *sql.DB         // the server's store pool
	mc      *dbtest.Process // the server's memcached
}

// cut leaves the server with nothing but its process memory: its store
// pool is closed (every MySQL call fails at once) and its memcached is
// killed. Other tests, and the test's own SQL (h.db), are not affected.
func (s *memoStack) cut(t *testing.T) {
	t.Helper()
	if err := s.storeDB.Close(); err != nil {
		t.Fatal(err)
	}
	s.mc.Stop()
}

func newMemoStack(t *testing.T, memo int) *memoStack {
	t.Helper()
	storeDB := dbtest.DB(t, "a", 16) // the server's own pool, which cut closes
	mc := dbtest.StartMemcached(t)
	if memo == 0 {
		memo = -1 // the harness's way of saying off
	}
	h := newHarness(t, harnessOpts{Memcached: mc.Addr, SoldOutMemo: memo, StoreDB: storeDB})
	return &memoStack{harness: h, storeDB: storeDB, mc: mc}
}

// sellOut sends a packet of count shares and has users open it through
// Server.Open, one after the other or all at once; it returns the packet
// and the shares taken, checked against MySQL.
func (s *memoStack) sellOut(t *testing.T, count int, users []hongbao.UserID, atOnce bool) (hongbao.PacketID, map[hongbao.UserID]int64) {
	t.Helper()
	id := s.mustSend(t, dbtest.FreshUser(), 100*int64(count), count, "random")
	type res struct {
		u   hongbao.UserID
		r   hongbao.OpenResult
		err error
	}
	results := make(chan res, len(users))
	var wg sync.WaitGroup
	for _, u := range users {
		open := func() {
			r, err := s.server.Open(context.Background(), id, u)
			results <- res{u, r, err}
		}
		if atOnce {
			wg.Go(open)
		} else {
			open()
		}
	}
	wg.Wait()
	close(results)
	told := map[hongbao.UserID]int64{}
	for x := range results {
		switch {
		case x.err == nil && x.r.Status == hongbao.Opened && x.r.User == x.u && x.r.Amount > 0:
			told[x.u] = x.r.Amount
		case errors.Is(x.err, hongbao.ErrSoldOut):
		default:
			t.Fatalf("user %d opening packet %d: %+v, %v", x.u, id, x.r, x.err)
		}
	}
	p := dbtest.CheckPacket(t, s.db, id)
	if p.RemainingCount != 0 || len(told) != count {
		t.Fatalf("packet %d: %d shares told, %d left; want %d told, sold out", id, len(told), p.RemainingCount, count)
	}
	assertSameShares(t, id, told, p.Shares)
	return id, told
}

// TestSoldOutMemo: once a packet sells out on a server, its openers are
// answered their own share and everyone else sold_out from the server's
// memory: with its MySQL pool closed and its memcached dead, the answers
// are still exact, through Server.Open and through the HTTP API.
func TestSoldOutMemo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		atOnce  bool
		openers int
	}{
		{"one after the other", false, 3},
		{"a crowd at once", true, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newMemoStack(t, 1000)
			users := distinctUsers(tc.openers + 20)
			id, told := s.sellOut(t, 3, users[:tc.openers], tc.atOnce)
			s.cut(t)
			// Proof that the server has nothing else left to ask.
			if err := s.storeDB.Ping(); err == nil {
				t.Fatal("the server's store pool still answers after cut")
			}

			for _, u := range users {
				r, err := s.server.Open(context.Background(), id, u)
				if amount, ok := told[u]; ok {
					want := hongbao.OpenResult{User: u, Amount: amount, Status: hongbao.AlreadyOpened}
					if err != nil || r != want {
						t.Errorf("opener %d opens again: %+v, %v; want %+v", u, r, err, want)
					}
					continue
				}
				if !errors.Is(err, hongbao.ErrSoldOut) || hongbao.Code(err) != "sold_out" || r != (hongbao.OpenResult{}) {
					t.Errorf("user %d opens the sold-out packet: %+v, %v; want sold_out", u, r, err)
				}
			}
			// The HTTP API answers the same, from the same memory.
			for _, u := range users[:tc.openers+3] {
				r := s.open(u, id.String())
				if amount, ok := told[u]; ok {
					if r.Status != http.StatusOK || r.Str("status") != hongbao.AlreadyOpened || r.Amount() != amount {
						t.Errorf("opener %d opens again over HTTP: %v; want already_opened %d", u, r, amount)
					}
					continue
				}
				if !r.IsProblem(http.StatusConflict, "sold_out") {
					t.Errorf("user %d opens over HTTP: %v; want sold_out", u, r)
				}
			}
		})
	}
}

// TestSoldOutMemoOff is the control of TestSoldOutMemo: without a memo
// (SoldOutMemo 0), the same server cut from MySQL and memcached cannot
// answer, so TestSoldOutMemo's answers did come from the memo. A packet
// larger than worth() (SoldOutMemo/4 shares) is not remembered either.
func TestSoldOutMemoOff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		memo, count int
	}{
		{"no memo", 0, 3},
		{"packet above worth", 8, 3}, // worth() = 2
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newMemoStack(t, tc.memo)
			users := distinctUsers(tc.count + 2)
			id, told := s.sellOut(t, tc.count, users[:tc.count], false)
			s.cut(t)
			for _, u := range users {
				r, err := s.server.Open(context.Background(), id, u)
				if u == users[0] {
					t.Logf("opener %d without the memo: %+v, %v", u, r, err)
				}
				if err == nil || errors.Is(err, hongbao.ErrSoldOut) {
					t.Errorf("user %d (share %d) opens with MySQL and memcached gone: %+v, %v; want a failure", u, told[u], r, err)
				}
			}
		})
	}
}
