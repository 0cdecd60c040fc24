package store_test

import (
	"cmp"
	"context"
	"database/sql"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
)

// orphanCase is a packet of TestOrphans: sent at sent, living an hour,
// opens of its 5 shares opened, then changed by after.
type orphanCase struct {
	name    string
	sent    time.Duration // before now
	funding hongbao.Funding
	opens   int
	after   func(t *testing.T, f *orphanFixture, id hongbao.PacketID)
	orphan  bool // an orphan 30 s after its expiry
	// noExpiry, noPending are the marks an orphan lacks.
	noExpiry, noPending bool
}

// orphanFixture is a fresh SET owning one bucket of test SET a's MariaDB,
// with a store on a settable clock.
type orphanFixture struct {
	db    *sql.DB
	loc   *time.Location
	set   string
	b     hongbao.Bucket
	clock *dbtest.Clock
	st    *store.Store
	seq   int // the next packet's sequence: cases sent at the same millisecond get distinct IDs
}

func newOrphanFixture(t *testing.T) *orphanFixture {
	t.Helper()
	db, loc, set, buckets := setup(t, 1)
	f := &orphanFixture{db: db, loc: loc, set: set, b: buckets[0], clock: &dbtest.Clock{}, seq: rand.IntN(4096)}
	f.st = store.New(db, set, loc, f.clock.Now, seeded(7))
	return f
}

// send creates a packet of 500 fen in 5 shares sent at sent, living an
// hour, and opens opens of its shares within that hour.
func (f *orphanFixture) send(t *testing.T, sent time.Time, funding hongbao.Funding, opens int) hongbao.PacketID {
	t.Helper()
	ctx := context.Background()
	// Random sequences collided now and then (several cases are sent at
	// the same millisecond): consecutive ones from a random start.
	id, err := hongbao.NewPacketID(sent, f.b, f.seq)
	f.seq = (f.seq + 1) % 4096
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Set(sent)
	if _, created, err := f.st.Create(ctx, store.NewPacket{ID: id, Sender: dbtest.FreshUser(), Expiry: time.Hour, Funding: funding,
		Req: hongbao.SendRequest{Total: 500, Count: 5, Type: hongbao.Random}}); err != nil || !created {
		t.Fatalf("create %s: created %v, %v", id, created, err)
	}
	f.clock.Set(sent.Add(time.Minute))
	for range opens {
		if r, err := f.st.Open(ctx, id, dbtest.FreshUser()); err != nil || r.Status != hongbao.Opened {
			t.Fatalf("open %s: %+v, %v", id, r, err)
		}
	}
	return id
}

// unmark deletes id's row of a mark table (expiry or pending).
func unmark(table string) func(*testing.T, *orphanFixture, hongbao.PacketID) {
	return func(t *testing.T, f *orphanFixture, id hongbao.PacketID) {
		t.Helper()
		if n := execN(t, f.db, "DELETE FROM hb_set."+table+" WHERE packet_id = ?", id); n != 1 {
			t.Fatalf("deleted %d %s marks of %s, want 1", n, table, id)
		}
	}
}

// closeNow closes id as the settler does, its expiry past.
func closeNow(t *testing.T, f *orphanFixture, id hongbao.PacketID) {
	t.Helper()
	f.clock.Set(time.Now())
	if done, _, err := f.st.Close(context.Background(), id); err != nil || !done {
		t.Fatalf("close %s: done %v, %v", id, done, err)
	}
}

// cancel settles pending id as cancelled, as the sweeper does.
func cancel(t *testing.T, f *orphanFixture, id hongbao.PacketID) {
	t.Helper()
	if _, err := f.st.Fund(context.Background(), id, hongbao.Cancelled); err != nil {
		t.Fatal(err)
	}
}

func execN(t *testing.T, db *sql.DB, q string, args ...any) int64 {
	t.Helper()
	res, err := db.Exec(q, args...)
	if err != nil {
		t.Fatal(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOrphans: a snapshot lists exactly the packets past expiry plus the
// delay that lack a mark they need (a funded one not closed nor sold out
// its expiry mark, a pending one its pending or expiry mark), with their
// sender and what is left; a packet within the delay, not expired,
// closed, sold out (its mark deleted by its close) or cancelled is none.
// RestoreMarks writes exactly the missing marks, nothing on a second run,
// and nothing for a packet settled meanwhile; the close it makes possible
// refunds exactly the rest.
func TestOrphans(t *testing.T) {
	ctx := context.Background()
	f := newOrphanFixture(t)
	const old = 3 * time.Hour // expired 2 h ago
	cases := []orphanCase{
		{name: "funded, expiry mark lost", sent: old, funding: hongbao.Funded, opens: 3, after: unmark("expiry"), orphan: true, noExpiry: true},
		{name: "funded, unopened, expiry mark lost", sent: old, funding: hongbao.Funded, after: unmark("expiry"), orphan: true, noExpiry: true},
		{name: "funded, marked", sent: old, funding: hongbao.Funded, opens: 3},
		{name: "funded, expiry mark lost, expired 10 s ago", sent: time.Hour + 10*time.Second, funding: hongbao.Funded, opens: 1, after: unmark("expiry")},
		{name: "funded, expiry mark lost, not expired", sent: time.Minute, funding: hongbao.Funded, after: unmark("expiry")},
		{name: "funded, closed", sent: old, funding: hongbao.Funded, opens: 2, after: closeNow},
		{name: "sold out, closed (mark gone, closed = 0)", sent: old, funding: hongbao.Funded, opens: 5, after: closeNow},
		{name: "pending, pending mark lost", sent: old, funding: hongbao.Pending, after: unmark("pending"), orphan: true, noPending: true},
		{name: "pending, expiry mark lost", sent: old, funding: hongbao.Pending, after: unmark("expiry"), orphan: true, noExpiry: true},
		{name: "pending, marked", sent: old, funding: hongbao.Pending},
		{name: "cancelled", sent: old, funding: hongbao.Pending, after: cancel},
	}
	now := time.Now()
	ids := make([]hongbao.PacketID, len(cases))
	var want []store.Orphan
	for i, c := range cases {
		ids[i] = f.send(t, now.Add(-c.sent), c.funding, c.opens)
		if c.after != nil {
			c.after(t, f, ids[i])
		}
		if c.orphan {
			want = append(want, f.orphan(t, ids[i], c.noExpiry, c.noPending))
		}
	}
	// Listed in ID order (the sequence numbers are random).
	slices.SortFunc(want, func(a, b store.Orphan) int { return cmp.Compare(a.Packet, b.Packet) })
	got := f.orphans(t, ids, now.Add(-30*time.Second))
	if !slices.Equal(got, want) {
		t.Fatalf("orphans:\n got %v\nwant %v", got, want)
	}
	// With no delay the packet expired 10 s ago is one too: the delay,
	// nothing else, spares it.
	if n := len(f.orphans(t, ids, time.Now())); n != len(want)+1 {
		t.Errorf("orphans with no delay: %d, want %d", n, len(want)+1)
	}

	restored, err := f.st.RestoreMarks(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	var wantRestored []store.Restored
	for _, o := range want {
		wantRestored = append(wantRestored, store.Restored{Packet: o.Packet, Expiry: o.NoExpiry, Pending: o.NoPending})
	}
	if !slices.Equal(restored, wantRestored) {
		t.Fatalf("restored %+v, want %+v", restored, wantRestored)
	}
	for _, o := range want {
		f.checkMarks(t, o.Packet)
	}
	if left := f.orphans(t, ids, now.Add(-30*time.Second)); len(left) != 0 {
		t.Errorf("orphans after the restore: %v", left)
	}
	f.restoreAgain(t, got, "its marks are there")

	// The settler's close now finds the opened one and refunds its rest, once.
	i := slices.IndexFunc(got, func(o store.Orphan) bool { return o.Funding == hongbao.Funded && o.RemainingCount == 2 })
	if i < 0 {
		t.Fatalf("no funded orphan with 2 shares left among %v", got)
	}
	o := got[i]
	f.clock.Set(time.Now())
	if ids, err := f.st.Due(ctx, "expiry", time.Now(), 100_000); err != nil || !slices.Contains(ids, o.Packet) {
		t.Fatalf("due expiry: %s not among %d (%v)", o.Packet, len(ids), err)
	}
	if done, refund, err := f.st.Close(ctx, o.Packet); err != nil || !done || refund != o.RemainingAmount {
		t.Fatalf("close %s: done %v, refund %d, %v; want %d", o.Packet, done, refund, err, o.RemainingAmount)
	}
	var user hongbao.UserID
	var amount int64
	var n int
	if err := f.db.QueryRow("SELECT COUNT(*), MAX(user_id), MAX(amount) FROM hb_set.outbox WHERE packet_id = ? AND kind = 'refund'",
		o.Packet).Scan(&n, &user, &amount); err != nil {
		t.Fatal(err)
	}
	if n != 1 || user != o.Sender || amount != o.RemainingAmount {
		t.Errorf("refunds of %s: %d, to %s, %d fen; want 1 to %s of %d", o.Packet, n, user, amount, o.Sender, o.RemainingAmount)
	}
	r, err := f.st.RestoreMarks(ctx, got[i:i+1])
	if err != nil || len(r) != 1 || r[0] != (store.Restored{Packet: o.Packet, Skipped: "settled meanwhile"}) {
		t.Errorf("restore of the closed one: %+v, %v", r, err)
	}
}

// orphan is what Orphans should say of id, read from its row.
func (f *orphanFixture) orphan(t *testing.T, id hongbao.PacketID, noExpiry, noPending bool) store.Orphan {
	t.Helper()
	p := dbtest.CheckPacket(t, f.db, id)
	packets, _ := dbtest.Tables(t, id)
	o := store.Orphan{Packet: id, Table: packets, Total: 500, Count: 5, ExpiresAt: id.Time().Add(time.Hour).UTC(),
		NoExpiry: noExpiry, NoPending: noPending}
	if err := f.db.QueryRow("SELECT sender, funding, remaining_amount, remaining_count FROM "+packets+" WHERE id = ?", id).Scan(
		&o.Sender, &o.Funding, &o.RemainingAmount, &o.RemainingCount); err != nil {
		t.Fatal(err)
	}
	var opened int64
	for _, a := range p.Shares {
		opened += a
	}
	if o.RemainingAmount != 500-opened || o.RemainingCount != 5-len(p.Shares) {
		t.Fatalf("packet %s: %d fen in %d shares left after %v", id, o.RemainingAmount, o.RemainingCount, p.Shares)
	}
	return o
}

// orphans lists the orphans among ids of a snapshot, expired before
// before (the bucket's tables may hold other tests' packets).
func (f *orphanFixture) orphans(t *testing.T, ids []hongbao.PacketID, before time.Time) []store.Orphan {
	t.Helper()
	ctx := context.Background()
	s, err := store.OpenSnapshot(ctx, f.db, f.db, f.set, f.loc)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.Orphans(ctx, before)
	if err != nil {
		t.Fatal(err)
	}
	var mine []store.Orphan
	for _, o := range all {
		if slices.Contains(ids, o.Packet) {
			o.ExpiresAt = o.ExpiresAt.UTC()
			mine = append(mine, o)
		}
	}
	return mine
}

// checkMarks fails unless id has its expiry mark at its expiry and, while
// pending, its pending mark at its creation.
func (f *orphanFixture) checkMarks(t *testing.T, id hongbao.PacketID) {
	t.Helper()
	packets, _ := dbtest.Tables(t, id)
	if n := dbtest.Count(t, f.db, "SELECT COUNT(*) FROM hb_set.expiry e JOIN "+packets+" p ON p.id = e.packet_id AND p.expires_at = e.expires_at WHERE p.id = ?", id); n != 1 {
		t.Errorf("packet %s: %d expiry marks at its expiry, want 1", id, n)
	}
	if n := dbtest.Count(t, f.db, "SELECT COUNT(*) FROM "+packets+" p LEFT JOIN hb_set.pending m ON m.packet_id = p.id AND m.created_at = p.created_at"+
		" WHERE p.id = ? AND (p.funding = 0) = (m.packet_id IS NOT NULL)", id); n != 1 {
		t.Errorf("packet %s: a pending mark not matching its funding", id)
	}
}

// restoreAgain checks that restoring the orphans again writes nothing,
// each skipped for why.
func (f *orphanFixture) restoreAgain(t *testing.T, orphans []store.Orphan, why string) {
	t.Helper()
	r, err := f.st.RestoreMarks(context.Background(), orphans)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range orphans {
		if want := (store.Restored{Packet: o.Packet, Skipped: why}); r[i] != want {
			t.Errorf("restore again: %+v, want %+v", r[i], want)
		}
	}
}
