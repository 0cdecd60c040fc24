package set_test

// Tests of concurrent opens through the HTTP API: however many clients race,
// each share is answered to exactly one user, and the answers are exactly
// the rows (DESIGN.md's invariants, read with the tests' own SQL).

import (
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestOpenRace: 1000 distinct users race for one 100-share packet. Exactly
// 100 win, their amounts add up to the total, everyone else is told
// sold_out, and the database holds exactly the answered shares.
func TestOpenRace(t *testing.T) {
	for _, tc := range []struct {
		typ   string
		total int64
	}{{"random", 20000}, {"fixed", 10000}} {
		t.Run(tc.typ, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			const count, clients = 100, 1000
			id := h.mustSend(t, dbtest.FreshUser(), tc.total, count, tc.typ)
			users := distinctUsers(clients)
			got := h.openAtOnce(id, users)

			opened := map[hongbao.UserID]int64{}
			var sum int64
			soldOut := 0
			var bad firstErrors
			for _, a := range got.list {
				kind, err := clustertest.Classify(a.R)
				switch {
				case err != nil:
					bad.add("user %d: %v", a.User, err)
				case a.won():
					if _, dup := opened[a.User]; dup {
						t.Errorf("user %d answered opened twice", a.User)
					}
					opened[a.User] = a.R.Amount()
					sum += a.R.Amount()
					if tc.typ == "fixed" && a.R.Amount() != tc.total/count {
						t.Errorf("fixed packet: user %d got %d fen, want %d", a.User, a.R.Amount(), tc.total/count)
					}
				case kind == "sold_out":
					soldOut++
				default:
					bad.add("user %d opened once and was answered %v", a.User, a.R)
				}
			}
			bad.report(t, "bad answers")
			got.summary(t)
			t.Logf("%d opened, %d sold out", len(opened), soldOut)
			if len(opened) != count || soldOut != clients-count {
				t.Errorf("%d opened and %d sold_out, want %d and %d", len(opened), soldOut, count, clients-count)
			}
			if sum != tc.total {
				t.Errorf("opened amounts sum to %d, want %d", sum, tc.total)
			}
			p := dbtest.CheckPacket(t, h.db, id)
			if p.RemainingCount != 0 || p.RemainingAmount != 0 {
				t.Errorf("after the race: %d shares and %d fen left", p.RemainingCount, p.RemainingAmount)
			}
			assertSameShares(t, id, opened, p.Shares)
		})
	}
}

// TestOneUserConcurrentOpens: one user opening one packet 50 times at once
// gets one share; every answer names it.
func TestOneUserConcurrentOpens(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.mustSend(t, dbtest.FreshUser(), 1000, 10, "random")
	user := dbtest.FreshUser()
	got := h.openAtOnce(id, slices.Repeat([]hongbao.UserID{user}, 50))
	got.summary(t)
	kinds := map[string]int{}
	amounts := map[int64]int{}
	unknown := 0
	for _, a := range got.list {
		unknown += a.Tries.Unknown
		kind, err := clustertest.Classify(a.R)
		if err != nil {
			t.Error(err)
			continue
		}
		kinds[kind]++
		amounts[a.R.Amount()]++
	}
	switch {
	case kinds[hongbao.Opened]+kinds[hongbao.AlreadyOpened] != 50:
		t.Errorf("answers %v, want 1 opened and 49 already_opened", kinds)
	case unknown == 0 && kinds[hongbao.Opened] != 1:
		t.Errorf("answers %v, want 1 opened and 49 already_opened", kinds)
	case kinds[hongbao.Opened] > 1:
		t.Errorf("answers %v: more than one opened", kinds)
	}
	if len(amounts) != 1 {
		t.Errorf("answers name several amounts: %v", amounts)
	}
	p, shares := checkInvariants(t, h.db, id)
	if len(shares) != 1 || shares[0].User != user || p.RemainingCount != 9 {
		t.Fatalf("rows %+v, remaining_count %d: want one share of user %d", shares, p.RemainingCount, user)
	}
	if amounts[shares[0].Amount] != 50 {
		t.Errorf("the row says %d fen, the answers %v", shares[0].Amount, amounts)
	}
}

// TestManyPacketsOverlappingUsers: 200 packets opened at once by 300 users,
// each opening a random subset of 40 of them.
func TestManyPacketsOverlappingUsers(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	const packets, users, perUser = 200, 300, 40
	ids := make([]hongbao.PacketID, packets)
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= packets {
					return
				}
				count := 5 + mrand.IntN(16)
				typ, total := "random", int64(count)+mrand.Int64N(int64(20000-count))
				if i%3 == 0 {
					typ, total = "fixed", int64(count)*(1+mrand.Int64N(20000/int64(count)))
				}
				r := h.send(dbtest.FreshUser(), map[string]any{"total": total, "count": count, "type": typ}, "")
				id, err := hongbao.ParsePacketID(r.Str("id"))
				if r.Status != http.StatusCreated || err != nil {
					t.Errorf("send %d: %v", i, r)
					return
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	us := distinctUsers(users)
	start := make(chan struct{})
	var got answers
	for _, u := range us {
		// Each user opens its packets a few at a time, as a client
		// tapping through several chats would.
		mine := make(chan int, perUser)
		for _, i := range mrand.Perm(packets)[:perUser] {
			mine <- i
		}
		close(mine)
		for range 4 {
			wg.Go(func() {
				<-start
				for i := range mine {
					got.open(h, u, ids[i])
				}
			})
		}
	}
	began := time.Now()
	close(start)
	wg.Wait()
	t.Logf("%d opens in %v", len(got.list), time.Since(began))

	told := got.told(t)
	for _, id := range ids {
		assertSameShares(t, id, told[id], dbtest.CheckPacket(t, h.db, id).Shares)
	}
}
