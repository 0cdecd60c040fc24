package set

// Tests of the answers the server gives from its memory (known packets and
// the sold-out memo) on the real stack: with every MySQL connection held and
// memcached watched, repeated opens and grabs are answered without either.

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestKnownRepeatedOpenFromMemory proves opened packets become known, known openers' repeated opens are answered exactly without MySQL or memcached, new openers get MySQL's shares, and a sell-out moves the packet to the memo.
func TestKnownRepeatedOpenFromMemory(t *testing.T) {
	t.Parallel()
	mc := dbtest.StartMemcached(t) // the server's own: its command count is the server's
	s := newStack(t, stackOpts{mc: mc.Addr})
	id := s.send(t, 600, 6)
	users := freshUsers(9)
	told := map[hongbao.UserID]int64{}
	for _, u := range users[:3] {
		told[u] = checkOpened(t, "first open", s.open(u, id), hongbao.Opened, 0)
	}
	if n := s.srv.KnownLive(); n != 1 {
		t.Errorf("KnownLive() = %d after three opens of a 6-share packet, want 1", n)
	}
	p := s.knowsTruth(t, "after three opens", id)
	checkShares(t, "after three opens", told, p.Shares)

	// No MySQL: every pooled connection is held, so any ask would wait
	// (and count in WaitCount). No memcached: the server's own one serves
	// no command meanwhile.
	ops := s.quiet(t, id, mc.Addr)
	waits, release := s.exhaust(t)
	defer release() // a second call gives nothing back twice
	for round := range 2 {
		for _, u := range users[:3] {
			start := time.Now()
			checkOpened(t, fmt.Sprintf("repeated open %d over HTTP", round), s.open(u, id), hongbao.AlreadyOpened, told[u])
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			res, err := s.srv.Open(ctx, id, u)
			cancel()
			if want := (hongbao.OpenResult{User: u, Amount: told[u], Status: hongbao.AlreadyOpened}); err != nil || res != want {
				t.Errorf("repeated Server.Open by %d: %+v, %v; want %+v", u, res, err, want)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("repeated opens by %d took %v with the pool held", u, d)
			}
		}
	}
	if st := s.pool.Stats(); st.WaitCount != waits {
		t.Errorf("repeated opens of known openers waited %d times for a MySQL connection, want 0", st.WaitCount-waits)
	}
	if n := memcachedOps(t, mc.Addr); n != ops {
		t.Errorf("repeated opens of known openers sent %d commands to memcached, want 0", n-ops)
	}
	// Control: a newcomer's open does need MySQL, so it waits for the pool.
	// It goes through the queue and takes its share once the pool is back.
	newcomer := make(chan reply, 1)
	go func() { newcomer <- s.open(users[3], id) }()
	select {
	case r := <-newcomer:
		t.Errorf("a newcomer's open answered with every connection held: %v; the check above proves nothing", r)
	case <-time.After(500 * time.Millisecond):
	}
	if st := s.pool.Stats(); st.WaitCount == waits {
		t.Errorf("the newcomer's open did not wait for a connection: the pool is not held")
	}
	release()
	told[users[3]] = checkOpened(t, "newcomer's open once the pool is back", <-newcomer, hongbao.Opened, 0)

	// New openers of the known packet: exact shares, and the knowledge
	// follows MySQL after each.
	p = s.knowsTruth(t, "after the newcomer", id)
	checkShares(t, "after the newcomer", told, p.Shares)
	told[users[4]] = checkOpened(t, "new opener", s.open(users[4], id), hongbao.Opened, 0)
	p = s.knowsTruth(t, "after a new opener", id)
	checkShares(t, "after a new opener", told, p.Shares)
	// The last share: sold out, remembered by the memo, no longer known.
	told[users[5]] = checkOpened(t, "last share", s.open(users[5], id), hongbao.Opened, 0)
	p = dbtest.CheckPacket(t, s.db, id)
	checkShares(t, "sold out", told, p.Shares)
	if p.RemainingCount != 0 || p.RemainingAmount != 0 || len(p.Shares) != 6 {
		t.Errorf("after six opens: %d shares, %d/%d left; want 6 shares, sold out", len(p.Shares), p.RemainingAmount, p.RemainingCount)
	}
	if n, kn := s.srv.KnownLive(), s.srv.known.get(id, time.Now()); n != 0 || kn != nil {
		t.Errorf("sold out: KnownLive() = %d, known %+v; want 0, nil", n, kn)
	}
	if !s.srv.memo.knows(id) || s.srv.SoldOutRemembered() != 1 {
		t.Errorf("sold out: memo knows %v, remembers %d packets; want true, 1", s.srv.memo.knows(id), s.srv.SoldOutRemembered())
	}
	waits, release = s.exhaust(t)
	defer release()
	for _, u := range users {
		r := s.open(u, id)
		if amount, ok := told[u]; ok {
			checkOpened(t, "open after sell-out", r, hongbao.AlreadyOpened, amount)
		} else if !r.IsProblem(http.StatusConflict, "sold_out") {
			t.Errorf("newcomer %d after sell-out: %v; want 409 sold_out", u, r)
		}
	}
	if st := s.pool.Stats(); st.WaitCount != waits {
		t.Errorf("opens of a sold-out packet waited %d times for MySQL, want 0 (the memo answers)", st.WaitCount-waits)
	}
}

// TestKnownGrab proves grab answers already_opened to known and memo openers and sold_out to a memo newcomer from memory alone (no MySQL connection).
func TestKnownGrab(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOpts{})
	live := s.send(t, 300, 3)
	soldOut := s.send(t, 200, 2)
	u := freshUsers(6)
	amount := checkOpened(t, "open of the live packet", s.open(u[0], live), hongbao.Opened, 0)
	a1 := checkOpened(t, "open of the 2-share packet", s.open(u[1], soldOut), hongbao.Opened, 0)
	a2 := checkOpened(t, "last share of the 2-share packet", s.open(u[2], soldOut), hongbao.Opened, 0)
	if a1+a2 != 200 || s.srv.known.get(live, time.Now()) == nil || !s.srv.memo.knows(soldOut) {
		t.Fatalf("setup: shares %d+%d of 200, live known %v, sold-out remembered %v", a1, a2,
			s.srv.known.get(live, time.Now()) != nil, s.srv.memo.knows(soldOut))
	}
	waits, release := s.exhaust(t)
	checkGrabbed(t, "grab by the known opener", s.grab(u[0], live), false, hongbao.AlreadyOpened)
	checkGrabbed(t, "grab by a memo's opener", s.grab(u[1], soldOut), false, hongbao.AlreadyOpened)
	checkGrabbed(t, "grab by a newcomer to a sold-out packet", s.grab(u[3], soldOut), false, string(hongbao.SoldOut))
	if r := s.open(u[3], soldOut); !r.IsProblem(http.StatusConflict, "sold_out") {
		t.Errorf("open by the newcomer to a sold-out packet: %v; want 409 sold_out", r)
	}
	if st := s.pool.Stats(); st.WaitCount != waits {
		t.Errorf("grabs answered from memory waited %d times for MySQL, want 0", st.WaitCount-waits)
	}
	release()
	checkGrabbed(t, "grab by a newcomer to the known live packet", s.grab(u[4], live), true, "")
	checkOpened(t, "open by the known opener", s.open(u[0], live), hongbao.AlreadyOpened, amount)
	if p := dbtest.CheckPacket(t, s.db, live); len(p.Shares) != 1 || p.Shares[u[0]] != amount {
		t.Errorf("the grabs changed the live packet: %v", p.Shares)
	}
}
