package set

// Tests of two servers of one SET opening the same packet concurrently, each
// knowing it from its own opens, which the other's commits make stale.

import (
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// TestKnownTwoServers proves two servers opening one packet at once, each with knowledge the other's commits make stale, answer exactly what MySQL holds on either server.
func TestKnownTwoServers(t *testing.T) {
	t.Parallel()
	set := dbtest.UniqueName("k2")
	dbtest.Own(t, dbtest.DB(t, "a", 4), set, fence.AllBuckets())
	mc := dbtest.StartMemcached(t).Addr // the SET's memcached, shared
	servers := []*stack{newStack(t, stackOpts{set: set, mc: mc, conns: 8}), newStack(t, stackOpts{set: set, mc: mc, conns: 8})}
	a, b := servers[0], servers[1]
	const count, total = 30, 30 * 157
	id := a.send(t, total, count)
	users := freshUsers(44)
	told := map[hongbao.UserID]int64{}
	where := map[hongbao.UserID]int{} // the server of a user's first open

	// Both learn the packet: A opens it, then B (which makes A's stale).
	for i, s := range servers {
		res, _, err := openUntil(s, id, users[i])
		if err != nil || res.Status != hongbao.Opened || res.Amount < 1 {
			t.Fatalf("first open on server %d: %+v, %v", i, res, err)
		}
		told[users[i]], where[users[i]] = res.Amount, i
	}
	b.knowsTruth(t, "B after its open", id)
	if kn := a.srv.known.get(id, time.Now()); kn == nil || len(kn.Openers) != 1 {
		t.Fatalf("A's knowledge of the packet after B's open: %+v; want one opener (stale)", kn)
	}

	// The race: rounds of six users, three on each server, all at once.
	var mu sync.Mutex
	var bad []string
	busy := 0
	for lo := 2; lo < len(users); lo += 6 {
		var wg sync.WaitGroup
		for i := lo; i < min(lo+6, len(users)); i++ {
			u, si := users[i], i%2
			wg.Go(func() {
				time.Sleep(time.Duration(mrand.IntN(3)) * time.Millisecond)
				res, n, err := openUntil(servers[si], id, u)
				// At once again on the other server, whose knowledge is
				// likely stale: the same answer.
				again, m, errAgain := openUntil(servers[1-si], id, u)
				mu.Lock()
				defer mu.Unlock()
				busy += n + m
				switch {
				case err == nil && res == (hongbao.OpenResult{User: u, Amount: res.Amount, Status: hongbao.Opened}) && res.Amount >= 1:
					told[u], where[u] = res.Amount, si
					if want := (hongbao.OpenResult{User: u, Amount: res.Amount, Status: hongbao.AlreadyOpened}); errAgain != nil || again != want {
						bad = append(bad, fmt.Sprintf("user %d opened %d on server %d, then on server %d: %+v, %v", u, res.Amount, si, 1-si, again, errAgain))
					}
				case errors.Is(err, hongbao.ErrSoldOut) && res == (hongbao.OpenResult{}):
					where[u] = si
					if !errors.Is(errAgain, hongbao.ErrSoldOut) || again != (hongbao.OpenResult{}) {
						bad = append(bad, fmt.Sprintf("user %d sold out on server %d, then on server %d: %+v, %v", u, si, 1-si, again, errAgain))
					}
				default:
					bad = append(bad, fmt.Sprintf("user %d on server %d: %+v, %v", u, si, res, err))
				}
			})
		}
		wg.Wait()
	}
	if len(bad) > 0 {
		t.Fatalf("%d bad first answers:\n\t%s", len(bad), strings.Join(bad, "\n\t"))
	}
	won := [2]int{}
	for u := range told {
		won[where[u]]++
	}
	t.Logf("shares taken on A: %d, on B: %d; %d users answered sold_out; %d busy answers retried", won[0], won[1], len(users)-len(told), busy)
	if won[0] < 2 || won[1] < 2 {
		t.Errorf("shares taken on A: %d, on B: %d; want both servers to open the packet in the race", won[0], won[1])
	}
	p := dbtest.CheckPacket(t, a.db, id)
	checkShares(t, "after the race", told, p.Shares)
	if len(p.Shares) != count || p.RemainingCount != 0 || p.RemainingAmount != 0 {
		t.Errorf("after 44 users: %d shares, %d/%d left; want %d shares, sold out", len(p.Shares), p.RemainingAmount, p.RemainingCount, count)
	}

	// Every user again, on the other server first, then on the same one:
	// the share MySQL holds, or sold_out. Concurrently, across both.
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Go(func() {
			for _, si := range []int{1 - where[u], where[u]} {
				r := servers[si].open(u, id)
				if amount, ok := told[u]; ok {
					checkOpened(t, fmt.Sprintf("user %d again on server %d", u, si), r, hongbao.AlreadyOpened, amount)
				} else if !r.IsProblem(http.StatusConflict, "sold_out") {
					t.Errorf("user %d without a share, again on server %d: %v; want 409 sold_out", u, si, r)
				}
			}
		})
	}
	wg.Wait()
	for i, s := range servers {
		if kn := s.srv.known.get(id, time.Now()); kn != nil || s.srv.KnownLive() != 0 {
			t.Errorf("server %d still knows the sold-out packet: %+v (%d known)", i, kn, s.srv.KnownLive())
		}
		if !s.srv.memo.knows(id) {
			t.Errorf("server %d does not remember the sold-out packet", i)
		}
	}
	p = dbtest.CheckPacket(t, a.db, id)
	checkShares(t, "at the end", told, p.Shares)
	if got := dbtest.OutboxCredits(t, a.db, id); len(got) != count {
		t.Errorf("%d openers credited, want %d", len(got), count)
	} else {
		for u, cr := range got {
			if len(cr) != 1 || cr[0] != told[u] {
				t.Errorf("user %d credited %v, share %d", u, cr, told[u])
			}
		}
	}
}
