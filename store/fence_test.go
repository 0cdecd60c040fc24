package store_test

// Integration tests of the fence: an open transaction commits only for
// buckets its SET owns.

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// TestOpenManyFence: a transaction including a packet of a bucket the SET
// does not own fails with ErrWrongSet, wherever that packet is in the
// works, and commits nothing of the other works; without it the same
// works open.
func TestOpenManyFence(t *testing.T) {
	ctx := context.Background()
	db := dbtest.DB(t, "a", 4)
	loc := dbtest.Shanghai(t)
	bs := randomBuckets(4)
	mine, mine2, theirs, nobodys := bs[0], bs[1], bs[2], bs[3]
	set, other := dbtest.UniqueName("om"), dbtest.UniqueName("om")
	dbtest.Own(t, db, set, []hongbao.Bucket{mine, mine2})
	dbtest.Own(t, db, other, []hongbao.Bucket{theirs})
	st := store.New(db, set, loc, time.Now, rand.Int64N)
	stOther := store.New(db, other, loc, time.Now, rand.Int64N)

	a := createPacket(t, st, mine, packetSpec{hongbao.Random, 1000, 5}, hongbao.Funded)
	d := createPacket(t, st, mine2, packetSpec{hongbao.Fixed, 300, 3}, hongbao.Funded)
	c := createPacket(t, stOther, theirs, packetSpec{hongbao.Random, 1000, 5}, hongbao.Funded)
	if _, _, err := st.Create(ctx, store.NewPacket{ID: mintID(t, theirs), Sender: dbtest.FreshUser(),
		Req: hongbao.SendRequest{Total: 100, Count: 1, Type: hongbao.Fixed}, Expiry: time.Hour, Funding: hongbao.Funded}); !errors.Is(err, hongbao.ErrWrongSet) {
		t.Fatalf("create in a bucket the SET does not own: %v, want wrong_set", err)
	}
	noRow := mintID(t, nobodys) // a bucket nobody owns, no row
	noTable := missingDayTable(t, db)
	for noTable.Bucket() == mine || noTable.Bucket() == mine2 {
		noTable = missingDayTable(t, db)
	}
	users := func(n int) []hongbao.UserID {
		return []hongbao.UserID{dbtest.FreshUser(), dbtest.FreshUser()}[:n]
	}
	for _, tc := range []struct {
		name string
		ids  []hongbao.PacketID
	}{
		{"owned then other SET's", []hongbao.PacketID{a, c}},
		{"other SET's then owned", []hongbao.PacketID{c, a}},
		{"owned, other SET's, owned", []hongbao.PacketID{a, c, d}},
		{"other SET's alone", []hongbao.PacketID{c}},
		{"unowned bucket, no row", []hongbao.PacketID{d, noRow, a}},
		{"unowned bucket, no row, alone", []hongbao.PacketID{noRow}},
		{"unowned bucket, no day table, alone", []hongbao.PacketID{noTable}},
		{"unowned bucket, no day table, with owned", []hongbao.PacketID{a, noTable}},
	} {
		var works []store.Work
		for _, id := range tc.ids {
			works = append(works, store.Work{ID: id, Users: users(2), SoldOutOpenersUpTo: 100})
		}
		got, err := st.OpenMany(ctx, works)
		if !errors.Is(err, hongbao.ErrWrongSet) {
			t.Errorf("%s: OpenMany: batches %+v, error %v; want wrong_set", tc.name, got, err)
		}
		if got != nil {
			t.Errorf("%s: batches %+v with the error", tc.name, got)
		}
		for _, id := range []hongbao.PacketID{a, d, c} {
			p := dbtest.CheckPacket(t, db, id)
			if len(p.Details) != 0 || p.RemainingAmount != p.Total || p.RemainingCount != p.Count {
				t.Errorf("%s: packet %s changed by a fenced transaction: %d shares, %d/%d left",
					tc.name, id, len(p.Details), p.RemainingAmount, p.RemainingCount)
			}
			checkCredits(t, db, p)
		}
	}
	// The control: without the foreign packet the same works commit, and
	// the other SET opens its own packet.
	got, err := st.OpenMany(ctx, []store.Work{{ID: a, Users: users(2)}, {ID: d, Users: users(1)}})
	if err != nil {
		t.Fatalf("OpenMany of owned packets: %v", err)
	}
	for i, b := range got {
		for _, o := range b.Outcomes {
			if o.Err != nil || o.Result.Status != hongbao.Opened {
				t.Errorf("owned work %d: outcome %+v, want opened", i, o)
			}
		}
	}
	if p := dbtest.CheckPacket(t, db, a); len(p.Details) != 2 {
		t.Errorf("packet a: %d shares after the control, want 2", len(p.Details))
	}
	if p := dbtest.CheckPacket(t, db, d); len(p.Details) != 1 || p.RemainingAmount != 200 {
		t.Errorf("packet d: %d shares, %d left after the control, want 1 and 200", len(p.Details), p.RemainingAmount)
	}
	if _, err := stOther.OpenMany(ctx, []store.Work{{ID: c, Users: users(1)}}); err != nil {
		t.Errorf("the owner of %s: %v", c, err)
	}
}

// TestOpenManyFrozenBucket: while a move holds a bucket's fence (its row
// deleted in a transaction still open), a transaction with a packet of
// that bucket fails at once with ErrMoving, read or known, and writes
// nothing, instead of waiting for the freeze with every other packet it
// carries; the other bucket's packets open meanwhile. When the move gives
// the bucket back (rollback) the packet opens; when it completes
// (commit), the answer is wrong_set.
func TestOpenManyFrozenBucket(t *testing.T) {
	ctx := t.Context()
	db := dbtest.DB(t, "a", 6)
	bs := randomBuckets(2)
	frozen, free := bs[0], bs[1]
	set := dbtest.UniqueName("fz")
	dbtest.Own(t, db, set, []hongbao.Bucket{frozen, free})
	st := store.New(db, set, dbtest.Shanghai(t), time.Now, rand.Int64N)
	a := createPacket(t, st, frozen, packetSpec{hongbao.Random, 1000, 5}, hongbao.Funded)
	d := createPacket(t, st, free, packetSpec{hongbao.Random, 1000, 5}, hongbao.Funded)
	// What a server knows of a after one open: the known path's works.
	first, err := st.OpenMany(ctx, []store.Work{{ID: a, Users: []hongbao.UserID{dbtest.FreshUser()}, OpenersUpTo: 100}})
	if err != nil {
		t.Fatal(err)
	}
	known := &hongbao.Snapshot{Packet: *first[0].Packet, Openers: first[0].Openers}

	freeze := func() *sql.Tx {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := fence.Disown(ctx, tx, set, []hongbao.Bucket{frozen}); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	tx := freeze()
	for _, tc := range []struct {
		name  string
		works []store.Work
	}{
		{"read, with another bucket's packet", []store.Work{{ID: d, Users: []hongbao.UserID{dbtest.FreshUser()}}, {ID: a, Users: []hongbao.UserID{dbtest.FreshUser()}}}},
		{"read, alone", []store.Work{{ID: a, Users: []hongbao.UserID{dbtest.FreshUser()}}}},
		{"known", []store.Work{{ID: a, Users: []hongbao.UserID{dbtest.FreshUser()}, Known: known}}},
	} {
		began := time.Now()
		got, err := st.OpenMany(ctx, tc.works)
		if !errors.Is(err, hongbao.ErrMoving) || got != nil {
			t.Errorf("%s, bucket frozen: %+v, %v; want ErrMoving", tc.name, got, err)
		}
		if took := time.Since(began); took > time.Second {
			t.Errorf("%s: failed after %v: it waited for the freeze", tc.name, took)
		}
	}
	if p := dbtest.CheckPacket(t, db, a); len(p.Details) != 1 {
		t.Errorf("packet of the frozen bucket: %d shares, want the 1 before the freeze", len(p.Details))
	}
	if got, err := st.OpenMany(ctx, []store.Work{{ID: d, Users: []hongbao.UserID{dbtest.FreshUser()}}}); err != nil || got[0].Outcomes[0].Result.Status != hongbao.Opened {
		t.Errorf("the other bucket during the freeze: %+v, %v", got, err)
	}
	if err := tx.Rollback(); err != nil { // the move gave up: the SET serves the bucket again
		t.Fatal(err)
	}
	if got, err := st.OpenMany(ctx, []store.Work{{ID: a, Users: []hongbao.UserID{dbtest.FreshUser()}}}); err != nil || got[0].Outcomes[0].Result.Status != hongbao.Opened {
		t.Errorf("after the move gave up: %+v, %v; want opened", got, err)
	}
	tx = freeze()
	if err := tx.Commit(); err != nil { // the move completed
		t.Fatal(err)
	}
	if _, err := st.OpenMany(ctx, []store.Work{{ID: a, Users: []hongbao.UserID{dbtest.FreshUser()}}}); !errors.Is(err, hongbao.ErrWrongSet) {
		t.Errorf("after the move: %v, want wrong_set", err)
	}
}
