package set_test

// Tests of the MySQL fence: a SET takes no open or send, and its store
// commits no write, for a bucket it does not own.

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// TestWrongSet: a SET refuses, and writes nothing for, buckets it does not
// own in its MySQL fence.
func TestWrongSet(t *testing.T) {
	t.Parallel()
	owner := newHarness(t, harnessOpts{})
	owned := []hongbao.Bucket{0, 1, 2, 3, 4}
	h := newHarness(t, harnessOpts{Buckets: owned})
	began := time.Now()

	// A packet of a bucket h does not own.
	var pid hongbao.PacketID
	for {
		pid = owner.mustSend(t, dbtest.FreshUser(), 1000, 10, "random")
		if pid.Bucket() >= 5 {
			break
		}
	}
	for range 3 {
		r := h.open(dbtest.FreshUser(), pid.String())
		if !r.IsProblem(http.StatusMisdirectedRequest, "wrong_set") {
			t.Errorf("open on the wrong SET: %v, want 421 wrong_set", r)
		}
	}
	// A packet of an unowned bucket whose day table this SET never had
	// (three weeks ahead): not found here means moved away, never 404.
	ahead, err := hongbao.NewPacketID(time.Now().AddDate(0, 0, 21), 9, 1)
	if err != nil {
		t.Fatal(err)
	}
	for path, r := range map[string]reply{"open": h.open(dbtest.FreshUser(), ahead.String()), "grab": h.grab(dbtest.FreshUser(), ahead.String())} {
		if !r.IsProblem(http.StatusMisdirectedRequest, "wrong_set") {
			t.Errorf("%s of a packet in an unowned bucket without its day table: %v, want 421 wrong_set", path, r)
		}
	}
	// Concurrent opens too (they may share a batch).
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			r, _ := h.openFinal(dbtest.FreshUser(), pid.String())
			if !r.IsProblem(http.StatusMisdirectedRequest, "wrong_set") {
				t.Errorf("concurrent open on the wrong SET: %v", r)
			}
		})
	}
	wg.Wait()
	if p, shares := checkInvariants(t, h.db, pid); len(shares) != 0 || p.RemainingCount != 10 {
		t.Errorf("the wrong SET took shares: %+v", shares)
	}
	// The owner still serves it.
	if r := owner.open(dbtest.FreshUser(), pid.String()); r.Status != http.StatusOK || r.Str("status") != hongbao.Opened {
		t.Errorf("open on the owning SET: %v", r)
	}

	// Sends whose bucket h does not own are refused; sends it owns work.
	wrongSender, rightSender := dbtest.FreshUser(), dbtest.FreshUser()
	var wrongKey, rightKey string
	for i := 0; wrongKey == "" || rightKey == ""; i++ {
		k := fmt.Sprintf("key-%d", i)
		if b := hongbao.BucketFor(wrongSender, []byte(k)); b >= 5 && wrongKey == "" {
			wrongKey = k
		}
		if b := hongbao.BucketFor(rightSender, []byte(k)); b < 5 && rightKey == "" {
			rightKey = k
		}
	}
	body := map[string]any{"total": 100, "count": 2}
	if r := h.send(wrongSender, body, wrongKey); !r.IsProblem(http.StatusMisdirectedRequest, "wrong_set") {
		t.Errorf("send to a bucket of another SET: %v", r)
	}
	if packets, idem := rowsBySenders(t, h.db, []hongbao.UserID{wrongSender}, began, time.Now()); packets != 0 || idem != 0 {
		t.Errorf("refused send wrote %d packet rows and %d idempotency rows", packets, idem)
	}
	r := h.send(rightSender, body, rightKey)
	if r.Status != http.StatusCreated {
		t.Fatalf("send to an owned bucket: %v", r)
	}
	own, _ := hongbao.ParsePacketID(r.Str("id"))
	if r := h.open(dbtest.FreshUser(), own.String()); r.Status != http.StatusOK || r.Str("status") != hongbao.Opened {
		t.Errorf("open in an owned bucket: %v", r)
	}
	checkInvariants(t, h.db, own)
}

// TestFenceCoversEveryWrite: once a bucket has moved away from a SET (its
// fence row deleted), no write of that SET's store commits for it: the open,
// the close and the funding of a pending send all fail with wrong_set and
// change nothing (DESIGN.md: "no write commits for a bucket that has moved
// away").
func TestFenceCoversEveryWrite(t *testing.T) {
	t.Parallel()
	db := dbtest.DB(t, "a", 8)
	ctx := t.Context()
	name := dbtest.UniqueName("t")
	const b = hongbao.Bucket(7)
	if err := fence.Own(ctx, db, name, 1, []hongbao.Bucket{b}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DELETE FROM hb_fence.owned WHERE set_name = ?", name)
	})
	loc := dbtest.Shanghai(t)
	st := store.New(db, name, loc, time.Now, mrand.Int64N)
	minter := hongbao.NewMinter(time.Now)
	create := func(funding hongbao.Funding) hongbao.PacketID {
		t.Helper()
		id, err := minter.Next(b)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = st.Create(ctx, store.NewPacket{ID: id, Sender: dbtest.FreshUser(), Expiry: time.Hour, Funding: funding,
			Req: hongbao.SendRequest{Total: 100, Count: 2, Type: hongbao.Random}})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	pending, funded := create(hongbao.Pending), create(hongbao.Funded)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fence.Disown(ctx, tx, name, []hongbao.Bucket{b}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	if _, err := st.OpenBatch(ctx, funded, []hongbao.UserID{dbtest.FreshUser()}); !errors.Is(err, hongbao.ErrWrongSet) {
		t.Errorf("OpenBatch after the move: %v, want wrong_set", err)
	}
	if _, _, err := st.Close(ctx, funded); !errors.Is(err, hongbao.ErrWrongSet) {
		t.Errorf("Close after the move: %v, want wrong_set", err)
	}
	if _, err := st.Fund(ctx, pending, hongbao.Funded); !errors.Is(err, hongbao.ErrWrongSet) {
		t.Errorf("Fund after the move: %v, want wrong_set", err)
	}
	p := dbtest.ReadPacket(t, db, pending)
	if p == nil {
		t.Fatalf("packet %d is gone from the moved-away SET", pending)
	}
	if p.Funding != hongbao.Pending {
		t.Errorf("the moved-away SET funded packet %d: funding %d", pending, p.Funding)
	}
	if n := dbtest.Count(t, db, "SELECT COUNT(*) FROM hb_set.pending WHERE packet_id = ?", pending); n != 1 {
		t.Errorf("the moved-away SET removed packet %d from hb_set.pending", pending)
	}
	if _, shares := checkInvariants(t, db, funded); len(shares) != 0 {
		t.Errorf("shares taken after the move: %+v", shares)
	}
}
