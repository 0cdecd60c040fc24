package store_test

// Integration tests of the fence: an open transaction commits only for
// buckets its SET owns.

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/dbtest"
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
