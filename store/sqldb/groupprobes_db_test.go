package sqldb_test

import (
	"database/sql"
	"testing"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestGroupProbesShared: pools of one process on a replicated group that
// share its probes (ProbedBy) probe each member over one connection, not
// one per pool, and all of them follow a promoted replica; a pool given
// the probes of other members is refused; and pools outlive the probes'
// Close where they are.
func TestGroupProbesShared(t *testing.T) {
	g := dbtest.StartReplicated(t, 0, 1)
	old, next := g.Primary, g.Replicas[0]
	members := []string{addrOf(old), addrOf(next)}
	ctx := t.Context()
	probes, err := sqldb.NewGroupProbes(old.AppDSN(), members)
	if err != nil {
		t.Fatal(err)
	}
	defer probes.Close()
	var pools []*sql.DB
	for _, name := range []string{"hb_meta", "hb_wallet", "hb_meta"} {
		db, err := sqldb.OpenGroup(ctx, old.AppDSN()+name, members, 2, true, sqldb.ProbedBy(probes))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if p := port(t, db); p != old.Port {
			t.Fatalf("pool on %s on port %d, want the primary's %d", name, p, old.Port)
		}
		pools = append(pools, db)
	}
	if db, err := sqldb.OpenGroup(ctx, old.AppDSN()+"hb_meta", []string{members[1], members[0]}, 1, false, sqldb.ProbedBy(probes)); err == nil {
		db.Close()
		t.Fatal("a pool on the members in another order took probes whose indexes name other members")
	}
	for _, m := range []*dbtest.MariaDB{old, next} {
		if n := probeConns(t, m); n != 1 {
			t.Errorf("%d probe connections (no database selected) on port %d from three pools sharing their probes, want 1", n, m.Port)
		}
	}

	promoteUnfenced(t, next, 3)
	for _, db := range pools {
		waitPort(t, db, next.Port)
	}

	probes.Close()
	for _, db := range pools {
		if p := port(t, db); p != next.Port {
			t.Errorf("after the probes closed a pool is on port %d, want %d where it was", p, next.Port)
		}
	}
}

// probeConns counts the application account's connections to m with no
// database selected: the probes' (a pool's select its database).
func probeConns(t *testing.T, m *dbtest.MariaDB) int {
	t.Helper()
	db, err := sqldb.Open(m.DSN, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ? AND DB IS NULL", dbtest.AppUser).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
