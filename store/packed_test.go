package store_test

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
)

// TestPackedCredits: a transaction of opens of two packets writes one
// outbox row per packet, packing its credits; every reader of the outbox
// (the settler's Outbox, a Snapshot, MoneyBetween's in-flight keys, the
// backlog) sees a credit per share, under its ledger key and
// of its amount; Delivered removes a packed row whole.
func TestPackedCredits(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := setup(t, 1)
	st := store.New(db, set, loc, time.Now, rand.Int64N)
	p1 := createPacket(t, st, buckets[0], packetSpec{hongbao.Random, 1000, 10}, hongbao.Funded)
	p2 := createPacket(t, st, buckets[0], packetSpec{hongbao.Random, 500, 5}, hongbao.Funded)
	backlog0, _, err := st.OutboxBacklog(ctx)
	if err != nil {
		t.Fatal(err)
	}
	users := []hongbao.UserID{dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()}
	bs, err := st.OpenMany(ctx, []store.Work{{ID: p1, Users: users}, {ID: p2, Users: users[:3]}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{} // ledger key -> amount
	sums := map[hongbao.PacketID]int64{}
	for i, id := range []hongbao.PacketID{p1, p2} {
		for k, o := range bs[i].Outcomes {
			if o.Err != nil || o.Result.Status != hongbao.Opened {
				t.Fatalf("open %s by %s: %+v", id, users[k], o)
			}
			want[hongbao.OpenKey(id, users[k])] = o.Result.Amount
			sums[id] += o.Result.Amount
		}
	}
	for id, n := range map[hongbao.PacketID]int{p1: 4, p2: 3} {
		if got := dbtest.Count(t, db, "SELECT COUNT(*) FROM hb_set.outbox WHERE packet_id = ? AND user_id = 0 AND n = ? AND amount = ? AND set_name = ?",
			id, n, sums[id], set+"/packed"); got != 1 {
			t.Errorf("packet %s: %d packed rows of %d credits and %d fen, want 1", id, got, n, sums[id])
		}
		if got := dbtest.Count(t, db, "SELECT COUNT(*) FROM hb_set.outbox WHERE packet_id = ?", id); got != 1 {
			t.Errorf("packet %s: %d outbox rows, want 1", id, got)
		}
		// A settler from before packing reads its SET's rows by name: it
		// must find none of these, or it would credit the sum to user 0.
		if got := dbtest.Count(t, db, "SELECT COUNT(*) FROM hb_set.outbox WHERE packet_id = ? AND set_name IN (?, '')", id, set); got != 0 {
			t.Errorf("packet %s: %d packed rows an older settler reads", id, got)
		}
	}
	ours := func(key string) bool {
		p, _ := store.PacketOf(key)
		return p == p1 || p == p2
	}

	rows, err := st.Outbox(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	got, ids := map[string]int64{}, map[hongbao.PacketID]map[int64]bool{p1: {}, p2: {}}
	for _, r := range rows {
		if r.Bad != nil || !ours(r.Entry.Key) {
			continue
		}
		got[r.Entry.Key] = r.Entry.Amount
		ids[r.Entry.Packet][r.ID] = true
		if r.Entry.Kind != hongbao.KindOpen || r.Entry.Key != hongbao.OpenKey(r.Entry.Packet, r.Entry.User) {
			t.Errorf("outbox entry %+v", r.Entry)
		}
	}
	if !maps.Equal(got, want) || len(ids[p1]) != 1 || len(ids[p2]) != 1 {
		t.Errorf("Outbox: %v in rows %v, want %v, one row a packet", got, ids, want)
	}
	// Rows come whole, until the limit is reached: with a limit of 2, as
	// many rows as it takes, each with all its credits.
	perRow := map[int64]int{}
	for _, r := range rows {
		perRow[r.ID]++
	}
	first, err := st.Outbox(ctx, 2)
	if err != nil || len(first) < 2 {
		t.Fatalf("Outbox(2) = %+v, %v", first, err)
	}
	firstRows := map[int64]int{}
	for _, r := range first {
		firstRows[r.ID]++
	}
	last := first[len(first)-1].ID
	for id, n := range firstRows {
		if n != perRow[id] {
			t.Errorf("Outbox(2): row %d with %d of its %d credits", id, n, perRow[id])
		}
	}
	if len(first)-firstRows[last] >= 2 {
		t.Errorf("Outbox(2) read on past its limit: %+v", first)
	}

	snap, err := store.OpenSnapshot(ctx, db, db, set, loc)
	if err != nil {
		t.Fatal(err)
	}
	owed := map[string]int64{}
	for _, o := range snap.Outbox {
		if ours(o.Key) {
			owed[o.Key] = o.Amount
		}
	}
	snap.Close()
	if !maps.Equal(owed, want) || len(snap.Bad) != 0 {
		t.Errorf("snapshot's outbox %v (bad %v), want %v", owed, snap.Bad, want)
	}
	_, inFlight, unreadable, err := st.MoneyBetween(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), time.Now().Add(-time.Hour))
	if err != nil || len(unreadable) != 0 {
		t.Fatal(err, unreadable)
	}
	for k := range want {
		if !inFlight[k] {
			t.Errorf("MoneyBetween: %s not in flight", k)
		}
	}
	if backlog, _, err := st.OutboxBacklog(ctx); err != nil || backlog-backlog0 != 7 {
		t.Errorf("backlog %d (was %d), %v; want 7 more credits", backlog, backlog0, err)
	}

	if err := st.Delivered(ctx, slices.Collect(maps.Keys(ids[p1]))); err != nil {
		t.Fatal(err)
	}
	if n := dbtest.Count(t, db, "SELECT COALESCE(SUM(n), 0) FROM hb_set.outbox WHERE packet_id IN (?, ?)", p1, p2); n != 3 {
		t.Errorf("after p1's row delivered: %d credits left, want p2's 3", n)
	}
}
