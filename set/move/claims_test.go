package move

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// TestRemoveStaleClaims: a claim of SET c's fence is deleted when neither
// the topology gives c the bucket nor a move of it to c is Disowning, and
// left otherwise, even when the caller's view of the topology is stale;
// and a live mover's claim that races the removal (made while the
// removal holds the row, after it read the journal) survives it.
func TestRemoveStaleClaims(t *testing.T) {
	ctx := context.Background()
	meta := metaDB(t)
	a, c := dbtest.UniqueName("ra"), dbtest.UniqueName("rc")
	top, err := topology.Init(ctx, meta, []topology.Set{{Name: a, MySQLDSN: "dsn-a"}, {Name: c, MySQLDSN: "dsn-c"}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := topology.NewJournal(ctx, meta, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	db := dbtest.DB(t, "a", 4)
	if err := schema.EnsureFence(ctx, db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DELETE FROM hb_fence.owned WHERE set_name IN (?, ?)", a, c) })
	ofA, ofC := top.Buckets(a), top.Buckets(c)
	v := top.Version
	claim := func(b hongbao.Bucket, version int64) {
		t.Helper()
		if err := fence.Claim(ctx, db, c, version, []hongbao.Bucket{b}); err != nil {
			t.Fatal(err)
		}
	}
	truth := func(b hongbao.Bucket) string { return top.Owner(b).Name }
	liar := func(hongbao.Bucket) string { return a } // a stale view: every bucket on a
	var knobs Knobs
	remove := func(owner func(hongbao.Bucket) string, want ...hongbao.Bucket) {
		t.Helper()
		r := NewRecovery("", nil, db, c, owner, zap.NewNop())
		r.Knobs = knobs
		got, err := r.RemoveStaleClaims(ctx, meta)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("RemoveStaleClaims = %v, %v; want %v", got, err, want)
		}
	}
	holds := func(b hongbao.Bucket) int64 {
		t.Helper()
		fence, err := fence.Claims(ctx, db, c)
		if err != nil {
			t.Fatal(err)
		}
		return fence[b]
	}

	stale, owned := ofA[3], ofC[0]
	claim(stale, v+1)
	claim(owned, v)
	remove(truth, stale)
	if holds(stale) != 0 || holds(owned) != v {
		t.Fatalf("after the removal: claims %d of %d, %d of %d; want none and %d", holds(stale), stale, holds(owned), owned, v)
	}
	remove(liar) // the meta database, read under the lock, says c owns it

	moving := ofA[5]
	r, err := j.Create(ctx, "move", 0, "", []topology.Move{{Bucket: moving, From: a, To: c}})
	if err != nil {
		t.Fatal(err)
	}
	m := &r.Moves[0]
	if err := claimTarget(ctx, j, m, db, v+1, func() {}); err != nil {
		t.Fatal(err)
	}
	remove(truth) // Disowning: the source's servers decide it
	if err := j.Retry(ctx, m); err != nil {
		t.Fatal(err)
	}
	remove(truth, moving) // sent back: the source kept it
	m.Step = topology.CatchingUp

	// The race: the removal read the journal (CatchingUp) and holds the row
	// when the mover records Disowning and claims; its claim waits, then
	// writes the row again.
	claim(moving, v+1) // the dead mover's
	done := make(chan error, 1)
	knobs.AfterStaleCheck = func(b hongbao.Bucket) {
		go func() { done <- claimTarget(ctx, j, m, db, v+2, func() {}) }()
		waitLockWait(t, db, c)
	}
	remove(truth, moving)
	knobs.AfterStaleCheck = nil
	if err := <-done; err != nil {
		t.Fatalf("the live mover's claim: %v", err)
	}
	if got := holds(moving); got != v+2 {
		t.Fatalf("after the race the fence holds bucket %d at version %d, want the live claim's %d", moving, got, v+2)
	}
	remove(truth) // Disowning again: left to the mover
}

// waitLockWait waits until a transaction claiming for set waits for a
// row lock.
func waitLockWait(t *testing.T, db *sql.DB, set string) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		// information_schema's InnoDB tables are refreshed at most every 0.1 s.
		err := db.QueryRow("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND INSTR(trx_query, ?) > 0",
			"'"+set+"'").Scan(&n)
		if err != nil {
			t.Error(err)
			return
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			rows, _ := db.Query("SELECT trx_state, IFNULL(trx_query, '') FROM information_schema.INNODB_TRX")
			for rows != nil && rows.Next() {
				var st, q string
				_ = rows.Scan(&st, &q)
				t.Logf("trx %s: %s", st, q)
			}
			t.Error("the live mover's claim never waited for the removal's lock")
			return
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// metaDB is a fresh meta database on test SET a's MariaDB, dropped at the end.
func metaDB(t *testing.T) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(dbtest.DSN(t, "a"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbtest.UniqueName("hb_meta_claims_")
	meta, err := topology.OpenMeta(context.Background(), cfg.FormatDSN(), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = meta.Exec("DROP DATABASE `" + cfg.DBName + "`")
		meta.Close()
	})
	return meta
}
