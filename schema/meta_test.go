package schema_test

import (
	"testing"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestEnsureMetaMakesTheEpochTable: the meta schema creates the core
// group's failover epochs, empty, so a member's probe is its one statement
// (epoch 0, writable) from the start; a second ensure runs no DDL and
// keeps an epoch a failover stamped. On a private MariaDB: a stamped epoch
// on the shared test server would reach other tests' pools.
func TestEnsureMetaMakesTheEpochTable(t *testing.T) {
	m := dbtest.StartMariaDB(t)
	root := dbtest.Open(t, m.DSN, 1)
	ctx := t.Context()
	if _, err := root.ExecContext(ctx, "CREATE DATABASE hb_meta"); err != nil {
		t.Fatal(err)
	}
	db := dbtest.Open(t, m.DSN+"hb_meta", 1)
	if err := schema.EnsureMeta(ctx, db); err != nil {
		t.Fatal(err)
	}
	var epoch int64
	if err := db.QueryRowContext(ctx, "SELECT COALESCE((SELECT MAX(epoch) FROM hb_core.failover), 0)").Scan(&epoch); err != nil || epoch != 0 {
		t.Fatalf("epoch table after EnsureMeta: epoch %d, err %v; want 0, nil", epoch, err)
	}
	if got := sqldb.ProbeMember(ctx, db); got != (sqldb.Probe{Writable: true, Epoch: 0}) {
		t.Errorf("probe after EnsureMeta = %+v, want writable at epoch 0", got)
	}
	if err := sqldb.StampEpoch(ctx, db, 4, "10.0.0.4:3306"); err != nil {
		t.Fatal(err)
	}
	before := creates(t, db) // the pool's one session
	if err := sqldb.EnsureEpochTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	if after := creates(t, db); after != before {
		t.Errorf("EnsureEpochTable on an existing table ran %d CREATE TABLE; want none", after-before)
	}
	if got := sqldb.ProbeMember(ctx, db); got != (sqldb.Probe{Writable: true, Epoch: 4}) {
		t.Errorf("probe after a second ensure = %+v, want writable at epoch 4 (kept)", got)
	}
}
