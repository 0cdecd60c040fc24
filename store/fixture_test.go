package store_test

// The fixture of the store's integration tests: a fresh SET owning fresh
// buckets of test SET a's MariaDB (dbtest.DB), packets created in them with
// IDs no other test meets, and checks and counters read from MySQL.

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
)

// minter mints the IDs of every packet these tests create: unique within
// the process, so no create of one test meets another's ID.
var minter = hongbao.NewMinter(time.Now)

// packetSpec is a packet to create.
type packetSpec struct {
	typ   hongbao.Type
	total int64
	count int
}

// createPacket creates a packet of spec in bucket b through st, with a fresh
// sender (so a colliding ID could never be replayed as this create).
func createPacket(t *testing.T, st *store.Store, b hongbao.Bucket, sp packetSpec, funding hongbao.Funding) hongbao.PacketID {
	t.Helper()
	id, err := minter.Next(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, created, err := st.Create(ctx, store.NewPacket{ID: id, Sender: dbtest.FreshUser(),
		Req: hongbao.SendRequest{Total: sp.total, Count: sp.count, Type: sp.typ}, Expiry: time.Hour, Funding: funding})
	if err != nil {
		t.Fatalf("create %+v in bucket %d: %v", sp, b, err)
	}
	if !created {
		t.Fatalf("create %s: not created (ID taken)", id)
	}
	return id
}

// setup opens the test MySQL and makes a fresh SET own n fresh buckets.
func setup(t *testing.T, n int) (*sql.DB, *time.Location, string, []hongbao.Bucket) {
	t.Helper()
	db := dbtest.DB(t, "a", 4)
	set := dbtest.UniqueName("om")
	buckets := randomBuckets(n)
	dbtest.Own(t, db, set, buckets)
	return db, dbtest.Shanghai(t), set, buckets
}

// randomBuckets returns n distinct random buckets.
func randomBuckets(n int) []hongbao.Bucket {
	var bs []hongbao.Bucket
	for _, i := range rand.Perm(hongbao.Buckets)[:n] {
		bs = append(bs, hongbao.Bucket(i))
	}
	return bs
}

// checkCredits asserts that the outbox holds exactly one credit per
// share of p, of the share's amount.
func checkCredits(t *testing.T, db *sql.DB, p *dbtest.Packet) {
	t.Helper()
	credits := dbtest.OutboxCredits(t, db, p.ID)
	want := map[hongbao.UserID][]int64{}
	for u, a := range p.Shares {
		want[u] = []int64{a}
	}
	if !maps.EqualFunc(credits, want, slices.Equal) {
		t.Errorf("packet %s: outbox credits %v, shares %v", p.ID, credits, p.Shares)
	}
}

// mintID mints an ID in bucket b for a packet the test does not create
// (or creates where it must be refused).
func mintID(t *testing.T, b hongbao.Bucket) hongbao.PacketID {
	t.Helper()
	id, err := minter.Next(b)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// missingDayTable returns a packet ID of a day of January 2025 whose day
// table does not exist in db (nor was created by anyone so far). Day tables
// are named by day of month only, so the day is kept away from today's,
// whose tables the tests' creates make.
func missingDayTable(t *testing.T, db *sql.DB) hongbao.PacketID {
	t.Helper()
	loc := dbtest.Shanghai(t)
	existing := map[string]bool{}
	for _, name := range dbtest.DayTables(t, db) {
		existing[name] = true
	}
	today := time.Now().In(loc).Day()
	for range 1000 {
		b := hongbao.Bucket(rand.IntN(hongbao.Buckets))
		day := 1 + rand.IntN(31)
		if d := day - today; d >= -1 && d <= 1 || today >= 30 && day <= 2 || today <= 2 && day >= 30 {
			continue
		}
		id, err := hongbao.NewPacketID(time.Date(2025, 1, day, 12, 0, 0, 0, loc), b, rand.IntN(4096))
		if err != nil {
			t.Fatal(err)
		}
		packets, details := dbtest.Tables(t, id)
		if !existing[packets] && !dbtest.TableExists(t, db, packets) && !dbtest.TableExists(t, db, details) {
			return id
		}
	}
	t.Fatal("every day table sampled exists")
	return 0
}

// countRows counts packet id's detail rows and outbox credits.
func countRows(t *testing.T, db *sql.DB, id hongbao.PacketID) (details, credits int) {
	t.Helper()
	_, dt := dbtest.Tables(t, id)
	details = dbtest.Count(t, db, "SELECT COUNT(*) FROM "+dt+" WHERE packet_id = ?", id)
	credits = dbtest.Count(t, db, "SELECT COALESCE(SUM(n), 0) FROM hb_set.outbox WHERE packet_id = ?", id)
	return details, credits
}

// reportFailures fails t with the first 20 failures and how many more there are.
func reportFailures(t *testing.T, failures []string) {
	t.Helper()
	for _, f := range failures[:min(len(failures), 20)] {
		t.Error(f)
	}
	if len(failures) > 20 {
		t.Errorf("... and %d more failures", len(failures)-20)
	}
}

// innodbDeadlocks reads the server's deadlock counter.
func innodbDeadlocks(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var name string
	var n int64
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'").Scan(&name, &n); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0
		}
		t.Fatal(err)
	}
	return n
}
