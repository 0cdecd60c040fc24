package store_test

// Two SETs on one MySQL server: each settler-side read and delete (the
// outbox, its backlog, the due lists, the money sums) sees only its own
// SET's rows, and the expiry and pending marks follow their bucket's
// fence. A private MariaDB, so every row and sum is known exactly.

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// outboxRow is an outbox entry as a test compares it.
type outboxRow struct {
	key    string
	user   hongbao.UserID
	amount int64
	kind   string
	packet hongbao.PacketID
}

func TestTwoSetsShareAMySQL(t *testing.T) {
	t.Parallel()
	m := dbtest.StartMariaDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := sqldb.Open(m.DSN, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	loc := dbtest.Shanghai(t)
	var clock dbtest.Clock
	now := time.Now().UTC().Truncate(time.Millisecond)
	clock.Set(now)
	ba, bb := hongbao.Bucket(17), hongbao.Bucket(842)
	dbtest.Own(t, db, "a", []hongbao.Bucket{ba})
	dbtest.Own(t, db, "b", []hongbao.Bucket{bb})
	a := store.New(db, "a", loc, clock.Now, rand.Int64N)
	b := store.New(db, "b", loc, clock.Now, rand.Int64N)
	c := store.New(db, "c", loc, clock.Now, rand.Int64N) // owns nothing, wrote nothing

	pa := createPacket(t, a, ba, packetSpec{hongbao.Random, 1000, 4}, hongbao.Funded)
	pa2 := createPacket(t, a, ba, packetSpec{hongbao.Fixed, 300, 3}, hongbao.Pending)
	pb := createPacket(t, b, bb, packetSpec{hongbao.Fixed, 600, 3}, hongbao.Funded)
	pb2 := createPacket(t, b, bb, packetSpec{hongbao.Fixed, 100, 1}, hongbao.Pending)
	u1, u2, u3, u4 := dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
	shares := opened(ctx, t, a, pa, u1, u2)
	if got := opened(ctx, t, b, pb, u3); got[0] != 200 {
		t.Fatalf("open of a fixed 600/3: %d fen, want 200", got[0])
	}
	// A row written before the outbox named its SET: every SET on the
	// MySQL delivers it.
	if _, err := db.ExecContext(ctx, "INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at) VALUES (?,?,?,?,?,?)",
		hongbao.OpenKey(pb, u4), u4, 5, hongbao.KindOpen, pb, now); err != nil {
		t.Fatal(err)
	}
	legacy := outboxRow{hongbao.OpenKey(pb, u4), u4, 5, hongbao.KindOpen, pb}

	hour := time.Hour
	for _, tc := range []struct {
		name  string
		st    *store.Store
		table string
		at    time.Time
		want  []hongbao.PacketID
	}{
		{"a expiry", a, "expiry", now.Add(2 * hour), []hongbao.PacketID{pa, pa2}},
		{"b expiry", b, "expiry", now.Add(2 * hour), []hongbao.PacketID{pb, pb2}},
		{"c expiry", c, "expiry", now.Add(2 * hour), nil},
		{"a expiry, not yet", a, "expiry", now, nil},
		{"a pending", a, "pending", now, []hongbao.PacketID{pa2}},
		{"b pending", b, "pending", now, []hongbao.PacketID{pb2}},
		{"c pending", c, "pending", now, nil},
	} {
		if got := due(ctx, t, tc.st, tc.table, tc.at); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Due = %v, want %v", tc.name, got, tc.want)
		}
	}

	clock.Set(now.Add(2 * hour))
	refundA := closed(ctx, t, a, pa)
	if want := 1000 - shares[0] - shares[1]; refundA != want {
		t.Fatalf("refund of %s: %d, want %d", pa, refundA, want)
	}
	if r := closed(ctx, t, b, pb); r != 400 {
		t.Fatalf("refund of %s: %d, want 400", pb, r)
	}
	if _, _, err := a.Close(ctx, pb); !errors.Is(err, hongbao.ErrWrongSet) {
		t.Errorf("SET a closing SET b's packet: %v, want wrong_set", err)
	}
	wantA := []outboxRow{
		{hongbao.OpenKey(pa, u1), u1, shares[0], hongbao.KindOpen, pa},
		{hongbao.OpenKey(pa, u2), u2, shares[1], hongbao.KindOpen, pa},
		legacy,
		{hongbao.RefundKey(pa), sender(ctx, t, a, pa), refundA, hongbao.KindRefund, pa},
	}
	wantB := []outboxRow{
		{hongbao.OpenKey(pb, u3), u3, 200, hongbao.KindOpen, pb},
		legacy,
		{hongbao.RefundKey(pb), sender(ctx, t, b, pb), 400, hongbao.KindRefund, pb},
	}
	checkOutbox(ctx, t, "a", a, 100, wantA)
	checkOutbox(ctx, t, "a, limit 2", a, 2, wantA[:2])
	checkOutbox(ctx, t, "b", b, 100, wantB)
	checkOutbox(ctx, t, "c", c, 100, []outboxRow{legacy})
	for _, tc := range []struct {
		name string
		st   *store.Store
		n    int
	}{{"a", a, 4}, {"b", b, 3}, {"c", c, 1}} {
		n, oldest, err := tc.st.OutboxBacklog(ctx)
		if err != nil || n != tc.n || !oldest.Equal(now) {
			t.Errorf("backlog of %s: %d rows, oldest %v, %v; want %d rows, oldest %v", tc.name, n, oldest, err, tc.n, now)
		}
	}
	checkTotals(ctx, t, db, shares, refundA)

	// Bucket ba moves to SET b: its marks follow the fence, its outbox rows
	// stay with SET a, which wrote them.
	if _, err := db.ExecContext(ctx, "DELETE FROM hb_fence.owned WHERE set_name = 'a' AND bucket = ?", int(ba)); err != nil {
		t.Fatal(err)
	}
	if err := fence.Own(ctx, db, "b", 2, []hongbao.Bucket{ba}); err != nil {
		t.Fatal(err)
	}
	if got := due(ctx, t, a, "pending", now); got != nil {
		t.Errorf("SET a's pending after its bucket left: %v, want none", got)
	}
	if got, want := due(ctx, t, b, "pending", now), sortedIDs(pa2, pb2); !slices.Equal(got, want) {
		t.Errorf("SET b's pending after the bucket came: %v, want %v", got, want)
	}
	checkOutbox(ctx, t, "a after the move", a, 100, wantA)
	checkOutbox(ctx, t, "b after the move", b, 100, wantB)

	// Delivering: SET a cannot delete SET b's rows, and its own delivery
	// leaves them.
	_, idsB := outbox(ctx, t, b, 100)
	if err := a.Delivered(ctx, []int64{idsB[0], idsB[2]}); err != nil {
		t.Fatal(err)
	}
	checkOutbox(ctx, t, "b after SET a deleted its IDs", b, 100, wantB)
	_, idsA := outbox(ctx, t, a, 100)
	if err := a.Delivered(ctx, idsA); err != nil {
		t.Fatal(err)
	}
	checkOutbox(ctx, t, "a delivered", a, 100, nil)
	checkOutbox(ctx, t, "b after SET a's delivery", b, 100, []outboxRow{wantB[0], wantB[2]})
}

// opened opens packet id for users through st and returns their shares.
func opened(ctx context.Context, t *testing.T, st *store.Store, id hongbao.PacketID, users ...hongbao.UserID) []int64 {
	t.Helper()
	bs, err := st.OpenMany(ctx, []store.Work{{ID: id, Users: users}})
	if err != nil {
		t.Fatalf("open %s: %v", id, err)
	}
	var amounts []int64
	for _, o := range bs[0].Outcomes {
		if o.Err != nil || o.Result.Status != hongbao.Opened || o.Result.Amount < 1 {
			t.Fatalf("open %s: %+v", id, o)
		}
		amounts = append(amounts, o.Result.Amount)
	}
	return amounts
}

// closed closes expired packet id through st and returns its refund.
func closed(ctx context.Context, t *testing.T, st *store.Store, id hongbao.PacketID) int64 {
	t.Helper()
	done, refund, err := st.Close(ctx, id)
	if err != nil || !done {
		t.Fatalf("close %s: done %v, %v", id, done, err)
	}
	return refund
}

func sender(ctx context.Context, t *testing.T, st *store.Store, id hongbao.PacketID) hongbao.UserID {
	t.Helper()
	p, err := st.Head(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return p.Sender
}

// due returns st's due list of table at, sorted.
func due(ctx context.Context, t *testing.T, st *store.Store, table string, at time.Time) []hongbao.PacketID {
	t.Helper()
	ids, err := st.Due(ctx, table, at, 100)
	if err != nil {
		t.Fatal(err)
	}
	return sortedIDs(ids...)
}

func sortedIDs(ids ...hongbao.PacketID) []hongbao.PacketID {
	if len(ids) == 0 {
		return nil
	}
	return slices.SortedFunc(slices.Values(ids), cmp.Compare)
}

// outbox returns st's outbox (up to limit rows) and the rows' IDs.
func outbox(ctx context.Context, t *testing.T, st *store.Store, limit int) ([]outboxRow, []int64) {
	t.Helper()
	rows, err := st.Outbox(ctx, limit)
	if err != nil {
		t.Fatal(err)
	}
	var out []outboxRow
	var ids []int64
	for _, r := range rows {
		e := r.Entry
		out = append(out, outboxRow{e.Key, e.User, e.Amount, e.Kind, e.Packet})
		ids = append(ids, r.ID)
	}
	if !slices.IsSorted(ids) {
		t.Errorf("outbox IDs %v not oldest first", ids)
	}
	return out, ids
}

func checkOutbox(ctx context.Context, t *testing.T, name string, st *store.Store, limit int, want []outboxRow) {
	t.Helper()
	if got, _ := outbox(ctx, t, st, limit); !slices.Equal(got, want) {
		t.Errorf("outbox of %s: %+v, want %+v", name, got, want)
	}
}

// checkTotals checks each SET's share of the money sums and the whole
// MySQL's. The unnamed row (5 fen) is in every SET's share.
func checkTotals(ctx context.Context, t *testing.T, db *sql.DB, shares []int64, refundA int64) {
	t.Helper()
	unpaid := func(int64) (bool, error) { return false, nil }
	for _, tc := range []struct {
		set  string
		want store.SetTotals
	}{
		{"a", store.SetTotals{Packets: 1, Funded: 1000, Details: 2, OutboxOpen: shares[0] + shares[1] + 5, OutboxRef: refundA, OutboxOpenN: 3}},
		{"b", store.SetTotals{Packets: 1, Funded: 600, Details: 1, OutboxOpen: 205, OutboxRef: 400, OutboxOpenN: 2}},
		{"c", store.SetTotals{OutboxOpen: 5, OutboxOpenN: 1}},
		{"", store.SetTotals{Packets: 2, Funded: 1600, Details: 3, OutboxOpen: shares[0] + shares[1] + 205, OutboxRef: refundA + 400, OutboxOpenN: 4}},
	} {
		var got store.SetTotals
		var bad []string
		var err error
		if tc.set == "" {
			got, bad, err = store.VerifySet(ctx, db, db, unpaid)
		} else {
			got, bad, err = store.VerifyOwned(ctx, db, db, tc.set, unpaid)
		}
		if err != nil || len(bad) > 0 || got != tc.want {
			t.Errorf("totals of SET %q: %+v, %v, %v; want %+v", tc.set, got, bad, err, tc.want)
		}
	}
}
