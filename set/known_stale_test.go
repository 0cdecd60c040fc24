package set

// Tests of knowledge made stale outside this server's opens: shares another
// server wrote, a settler's close, expiry, a bucket moved away. The answers
// stay MySQL's, and the server forgets or relearns the packet.

import (
	"context"
	"database/sql"
	"errors"
	mrand "math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// writeForeignShare writes a share of packet id for user straight into MySQL,
// as another server's transaction would have (detail row, credit, packet).
func writeForeignShare(t *testing.T, db *sql.DB, id hongbao.PacketID, user hongbao.UserID, amount int64) {
	t.Helper()
	pt, dt := dbtest.Tables(t, id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck
	var count, left int
	if err := tx.QueryRowContext(ctx, "SELECT count, remaining_count FROM "+pt+" WHERE id = ? FOR UPDATE", id).Scan(&count, &left); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO " + dt + " (packet_id, user_id, amount, seq, opened_at) VALUES (?,?,?,?,?)", []any{id, user, amount, count - left + 1, now}},
		{"INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at) VALUES (?,?,?,?,?,?)",
			[]any{hongbao.OpenKey(id, user), user, amount, hongbao.KindOpen, id, now}},
		{"UPDATE " + pt + " SET remaining_amount = remaining_amount - ?, remaining_count = remaining_count - 1 WHERE id = ?", []any{amount, id}},
	} {
		if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// offsetClock is a clock running with the real one, offset by what a test adds.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *offsetClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// TestKnownStaleOutside proves knowledge made stale outside this server's opens (shares in MySQL, a settler's close, expiry) gives the true answers and is forgotten or relearnt as MySQL holds it.
func TestKnownStaleOutside(t *testing.T) {
	t.Parallel()
	t.Run("shares written in MySQL", func(t *testing.T) {
		// Another server's opens (shares, credits, what is left) land in
		// MySQL while this server knows the packet.
		t.Parallel()
		s := newStack(t, stackOpts{})
		id := s.send(t, 800, 8)
		u := freshUsers(7)
		told := map[hongbao.UserID]int64{}
		for _, x := range u[:2] {
			told[x] = checkOpened(t, "open", s.open(x, id), hongbao.Opened, 0)
		}
		s.knowsTruth(t, "before", id)
		foreign, alsoForeign := u[2], u[3]
		writeForeignShare(t, s.db, id, foreign, 50)
		writeForeignShare(t, s.db, id, alsoForeign, 30)
		told[foreign], told[alsoForeign] = 50, 30
		if kn := s.srv.known.get(id, time.Now()); kn == nil || len(kn.Openers) != 2 {
			t.Fatalf("the server's knowledge: %+v; want the two shares it opened (stale)", kn)
		}
		// The foreign opener opens here: the share MySQL holds, never a
		// second one (the detail key fails the write from knowledge).
		checkOpened(t, "the foreign opener opens here", s.open(foreign, id), hongbao.AlreadyOpened, 50)
		p := s.knowsTruth(t, "after the foreign opener", id)
		checkShares(t, "after the foreign opener", told, p.Shares)
		checkOpened(t, "the other foreign opener", s.open(alsoForeign, id), hongbao.AlreadyOpened, 30)
		// A newcomer: a share drawn from what is truly left.
		told[u[4]] = checkOpened(t, "newcomer", s.open(u[4], id), hongbao.Opened, 0)
		p = s.knowsTruth(t, "after the newcomer", id)
		checkShares(t, "after the newcomer", told, p.Shares)
		// Stale again, and a newcomer first this time (the conditional
		// update fails the write from knowledge).
		writeForeignShare(t, s.db, id, u[5], 20)
		told[u[5]] = 20
		told[u[6]] = checkOpened(t, "newcomer after another foreign share", s.open(u[6], id), hongbao.Opened, 0)
		checkOpened(t, "the third foreign opener", s.open(u[5], id), hongbao.AlreadyOpened, 20)
		p = s.knowsTruth(t, "at the end", id)
		checkShares(t, "at the end", told, p.Shares)
		if len(p.Shares) != 7 || p.RemainingCount != 1 {
			t.Errorf("%d shares, %d left; want 7, 1", len(p.Shares), p.RemainingCount)
		}
	})
	t.Run("settler closes it", func(t *testing.T) {
		// The settler's clock runs ahead: it closes the packet (and
		// refunds the rest) while this server still sees it live.
		t.Parallel()
		s := newStack(t, stackOpts{})
		id := s.send(t, 500, 5)
		u := freshUsers(3)
		amount := checkOpened(t, "open", s.open(u[0], id), hongbao.Opened, 0)
		s.knowsTruth(t, "before the close", id)
		settler := store.New(s.db, s.set, dbtest.Shanghai(t), func() time.Time { return time.Now().Add(25 * time.Hour) }, mrand.Int64N)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done, refund, err := settler.Close(ctx, id)
		if err != nil || !done || refund != 500-amount {
			t.Fatalf("settler's close: %v, refund %d, %v; want done, refund %d", done, refund, err, 500-amount)
		}
		if s.srv.known.get(id, s.srv.now()) == nil {
			t.Fatal("the server forgot the packet before any open: nothing stale to test")
		}
		checkOpened(t, "the opener again", s.open(u[0], id), hongbao.AlreadyOpened, amount)
		for _, x := range u[1:] {
			if r := s.open(x, id); !r.IsProblem(http.StatusGone, "expired") {
				t.Errorf("newcomer %d after the close: %v; want 410 expired", x, r)
			}
		}
		if kn := s.srv.known.get(id, s.srv.now()); kn != nil || s.srv.KnownLive() != 0 {
			t.Errorf("after an open of the closed packet the server still knows it: %+v (%d known)", kn, s.srv.KnownLive())
		}
		pt, _ := dbtest.Tables(t, id)
		p := dbtest.CheckPacket(t, s.db, id)
		closed := dbtest.Count(t, s.db, "SELECT closed FROM "+pt+" WHERE id = ?", id)
		if len(p.Shares) != 1 || p.Shares[u[0]] != amount || p.RemainingCount != 4 || p.RemainingAmount != 500-amount || closed != 1 {
			t.Errorf("after the close: shares %v, %d/%d left, closed %d; want only %d's share", p.Shares, p.RemainingAmount, p.RemainingCount, closed, u[0])
		}
	})
	t.Run("expiry passes", func(t *testing.T) {
		// The server's own clock passes the expiry: what it knows is no
		// longer used, and the answers come from MySQL.
		t.Parallel()
		clock := &offsetClock{}
		s := newStack(t, stackOpts{now: clock.now})
		id := s.send(t, 500, 5)
		u := freshUsers(2)
		amount := checkOpened(t, "open", s.open(u[0], id), hongbao.Opened, 0)
		s.knowsTruth(t, "before expiry", id)
		clock.advance(hongbao.DefaultLimits().Expiry + time.Second)
		if _, answered, live := s.srv.known.answer(id, u[0], s.srv.now()); answered || live {
			t.Errorf("known still answers after expiry: answered %v, live %v", answered, live)
		}
		if r := s.open(u[1], id); !r.IsProblem(http.StatusGone, "expired") {
			t.Errorf("newcomer after expiry: %v; want 410 expired", r)
		}
		checkOpened(t, "the opener after expiry", s.open(u[0], id), hongbao.AlreadyOpened, amount)
		checkGrabbed(t, "grab by the opener after expiry", s.grab(u[0], id), false, hongbao.AlreadyOpened)
		checkGrabbed(t, "grab by a newcomer after expiry", s.grab(u[1], id), false, string(hongbao.Expired))
		if p := dbtest.CheckPacket(t, s.db, id); len(p.Shares) != 1 || p.RemainingCount != 4 {
			t.Errorf("after expiry: shares %v, %d left", p.Shares, p.RemainingCount)
		}
	})
}

// TestKnownForgetsAfterFailedOpen proves a failed transaction (the bucket moved away) makes the server forget the packet: nothing more is answered from memory until MySQL is read again.
func TestKnownForgetsAfterFailedOpen(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOpts{})
	id := s.send(t, 400, 4)
	u := freshUsers(3)
	amount := checkOpened(t, "open", s.open(u[0], id), hongbao.Opened, 0)
	s.knowsTruth(t, "before the move", id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fence.Disown(ctx, tx, s.set, []hongbao.Bucket{id.Bucket()}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, x := range []hongbao.UserID{u[1], u[0]} {
		res, _, err := openUntil(s, id, x)
		if !errors.Is(err, hongbao.ErrWrongSet) {
			t.Errorf("open by %d with the bucket moved away: %+v, %v; want wrong_set", x, res, err)
		}
		if kn := s.srv.known.get(id, time.Now()); kn != nil || s.srv.KnownLive() != 0 {
			t.Errorf("after a failed open the server still knows the packet: %+v", kn)
		}
	}
	if err := fence.Own(ctx, s.db, s.set, 1, []hongbao.Bucket{id.Bucket()}); err != nil {
		t.Fatal(err)
	}
	checkOpened(t, "the opener with the bucket back", s.open(u[0], id), hongbao.AlreadyOpened, amount)
	fresh := checkOpened(t, "a newcomer with the bucket back", s.open(u[2], id), hongbao.Opened, 0)
	p := s.knowsTruth(t, "with the bucket back", id)
	checkShares(t, "with the bucket back", map[hongbao.UserID]int64{u[0]: amount, u[2]: fresh}, p.Shares)
}
