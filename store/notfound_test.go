package store_test

// Integration tests of packets that do not exist for their openers (no
// row, unfunded, no day table), alone and merged with packets that do.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
)

// TestOpenManyNotFound: a packet with no row, a pending and a cancelled one
// answer not_found for each of their users while the other works of the
// same transaction open; a lone packet whose day table does not exist
// answers not_found outcomes (no error, no table created); merged with
// others, such a packet fails the transaction as documented (readErr) and
// nothing of it commits.
func TestOpenManyNotFound(t *testing.T) {
	ctx := context.Background()
	db := dbtest.DB(t, "a", 4)
	loc := dbtest.Shanghai(t)
	set := dbtest.UniqueName("om")
	missingTable := missingDayTable(t, db)
	buckets := append(randomBuckets(1), missingTable.Bucket())
	if buckets[0] == buckets[1] {
		buckets = buckets[1:]
	}
	dbtest.Own(t, db, set, buckets)
	st := store.New(db, set, loc, time.Now, seeded(11))
	b := buckets[0]
	u := func(n int) hongbao.UserID { return hongbao.UserID(8000 + n) }

	t.Run("missing row and unfunded among others", func(t *testing.T) {
		a := createPacket(t, st, b, packetSpec{hongbao.Random, 1000, 5}, hongbao.Funded)
		missing, err := minter.Next(b) // same bucket and day as a: the table exists
		if err != nil {
			t.Fatal(err)
		}
		pending := createPacket(t, st, b, packetSpec{hongbao.Random, 500, 5}, hongbao.Pending)
		cancelled := createPacket(t, st, b, packetSpec{hongbao.Fixed, 300, 3}, hongbao.Cancelled)
		fixed := createPacket(t, st, b, packetSpec{hongbao.Fixed, 300, 3}, hongbao.Funded)
		works := []store.Work{
			{ID: a, Users: []hongbao.UserID{u(1), u(2)}, SoldOutOpenersUpTo: 100},
			{ID: missing, Users: []hongbao.UserID{u(1), u(2), u(3)}, SoldOutOpenersUpTo: 100},
			{ID: pending, Users: []hongbao.UserID{u(1)}, SoldOutOpenersUpTo: 100},
			{ID: fixed, Users: []hongbao.UserID{u(1), u(1), u(4)}, SoldOutOpenersUpTo: 100},
			{ID: cancelled, Users: []hongbao.UserID{u(2), u(5)}, SoldOutOpenersUpTo: 100},
		}
		bs, err := st.OpenMany(ctx, works)
		if err != nil {
			t.Fatalf("OpenMany: %v", err)
		}
		if len(bs) != len(works) {
			t.Fatalf("%d batches for %d works", len(bs), len(works))
		}
		var got []string
		for i, b := range bs {
			got = append(got, printBatch(t, i, works[i], b)...)
			if b.Openers != nil {
				t.Errorf("work %d (%s): Openers %v on a packet not sold out", i, works[i].ID, b.Openers)
			}
		}
		pa := dbtest.CheckPacket(t, db, a)
		want := []string{
			fmt.Sprintf("p0 %s:opened:%d", u(1), pa.Shares[u(1)]),
			fmt.Sprintf("p0 %s:opened:%d", u(2), pa.Shares[u(2)]),
			fmt.Sprintf("p0 left %d/3", pa.RemainingAmount),
			"p1 " + u(1).String() + ":not_found", "p1 " + u(2).String() + ":not_found", "p1 " + u(3).String() + ":not_found",
			"p1 no packet",
			"p2 " + u(1).String() + ":not_found", "p2 no packet",
			"p3 " + u(1).String() + ":opened:100", "p3 " + u(1).String() + ":already_opened:100", "p3 " + u(4).String() + ":opened:100",
			"p3 left 100/1",
			"p4 " + u(2).String() + ":not_found", "p4 " + u(5).String() + ":not_found", "p4 no packet",
		}
		if !slices.Equal(got, want) {
			t.Errorf("outcomes: %s\ngot  %v\nwant %v", diffLines(got, want), got, want)
		}
		if len(pa.Shares) != 2 || pa.RemainingCount != 3 {
			t.Errorf("packet a: %d shares, %d left; want 2 and 3", len(pa.Shares), pa.RemainingCount)
		}
		checkCredits(t, db, pa)
		checkCredits(t, db, dbtest.CheckPacket(t, db, fixed))
		if p := dbtest.ReadPacket(t, db, missing); p != nil {
			t.Errorf("missing packet %s has a row: %+v", missing, p)
		}
		for _, id := range []hongbao.PacketID{pending, cancelled} {
			p := dbtest.CheckPacket(t, db, id)
			if len(p.Details) != 0 || p.RemainingAmount != p.Total || p.RemainingCount != p.Count {
				t.Errorf("unfunded packet %s was opened: %d shares, %d/%d left", id, len(p.Details), p.RemainingAmount, p.RemainingCount)
			}
			checkCredits(t, db, p)
		}
	})

	t.Run("day table missing, one packet", func(t *testing.T) {
		id := missingTable
		users := []hongbao.UserID{u(1), u(2), u(1)}
		bs, err := st.OpenMany(ctx, []store.Work{{ID: id, Users: users, SoldOutOpenersUpTo: 100}})
		if err != nil {
			t.Fatalf("OpenMany of %s (no day table): %v, want not_found outcomes", id, err)
		}
		if len(bs) != 1 {
			t.Fatalf("%d batches for 1 work", len(bs))
		}
		got := printBatch(t, 0, store.Work{ID: id, Users: users}, bs[0])
		want := []string{"p0 " + u(1).String() + ":not_found", "p0 " + u(2).String() + ":not_found",
			"p0 " + u(1).String() + ":not_found", "p0 no packet"}
		if !slices.Equal(got, want) || bs[0].Openers != nil {
			t.Errorf("outcomes %v (openers %v), want %v", got, bs[0].Openers, want)
		}
		if _, err := st.Open(ctx, id, u(3)); !errors.Is(err, hongbao.ErrNotFound) {
			t.Errorf("Open of %s (no day table): %v, want not_found", id, err)
		}
		packets, details := dbtest.Tables(t, id)
		if dbtest.TableExists(t, db, packets) || dbtest.TableExists(t, db, details) {
			t.Errorf("an open created the day table %s", packets)
		}
	})

	t.Run("day table missing, the one packet twice", func(t *testing.T) {
		works := []store.Work{{ID: missingTable, Users: []hongbao.UserID{u(1)}}, {ID: missingTable, Users: []hongbao.UserID{u(2), u(3)}}}
		bs, err := st.OpenMany(ctx, works)
		if err != nil || len(bs) != 2 {
			t.Fatalf("OpenMany = %d batches, %v; want one per work", len(bs), err)
		}
		for i, w := range works {
			if len(bs[i].Outcomes) != len(w.Users) {
				t.Fatalf("work %d: %d outcomes for %d users", i, len(bs[i].Outcomes), len(w.Users))
			}
			for _, o := range bs[i].Outcomes {
				if !errors.Is(o.Err, hongbao.ErrNotFound) {
					t.Errorf("work %d: outcome %+v, want not_found", i, o)
				}
			}
		}
	})

	t.Run("a work without users", func(t *testing.T) {
		a := createPacket(t, st, buckets[0], packetSpec{typ: hongbao.Fixed, total: 300, count: 3}, hongbao.Funded)
		bs, err := st.OpenMany(ctx, []store.Work{{ID: a}, {ID: a, Users: []hongbao.UserID{u(9)}}})
		if err != nil || len(bs) != 2 || len(bs[0].Outcomes) != 0 || len(bs[1].Outcomes) != 1 {
			t.Fatalf("OpenMany = %+v, %v; want no outcome for the empty work and one share", bs, err)
		}
		if r := bs[1].Outcomes[0].Result; r.Status != hongbao.Opened || r.Amount != 100 {
			t.Errorf("share %+v, want opened 100 fen", r)
		}
	})

	t.Run("day table missing, merged with others", func(t *testing.T) {
		// A made-up ID must not fail the packets it shares a transaction
		// with: it answers not_found, the others open.
		a := createPacket(t, st, b, packetSpec{hongbao.Random, 1000, 5}, hongbao.Funded)
		var sum int64
		for i, works := range [][]store.Work{
			{{ID: a, Users: []hongbao.UserID{u(1)}}, {ID: missingTable, Users: []hongbao.UserID{u(1)}}},
			{{ID: missingTable, Users: []hongbao.UserID{u(2), u(3)}}, {ID: a, Users: []hongbao.UserID{u(2)}}},
		} {
			bs, err := st.OpenMany(ctx, works)
			if err != nil || len(bs) != 2 {
				t.Fatalf("round %d: OpenMany = %d batches, %v; want one per work", i, len(bs), err)
			}
			for j, w := range works {
				for k, o := range bs[j].Outcomes {
					switch {
					case w.ID == missingTable && !errors.Is(o.Err, hongbao.ErrNotFound):
						t.Errorf("round %d: open of the made-up packet = %+v, want not_found", i, o)
					case w.ID == a && (o.Err != nil || o.Result.Status != hongbao.Opened || o.Result.User != w.Users[k]):
						t.Errorf("round %d: open of %s = %+v, want a share", i, a, o)
					case w.ID == a:
						sum += o.Result.Amount
					}
				}
			}
		}
		p := dbtest.CheckPacket(t, db, a)
		if len(p.Details) != 2 || p.RemainingCount != 3 || p.RemainingAmount != 1000-sum {
			t.Errorf("packet %s: %d shares, %d left of %d fen; want the 2 shares answered (%d fen)", a, len(p.Details), p.RemainingAmount, p.Total, sum)
		}
		checkCredits(t, db, p)
	})
}
