package failover

import (
	"context"
	"testing"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestFailoverRefusesReplicaOfNobody: a replica the group lists that
// replicates from nobody (a reseed whose dump failed left it empty, as in
// a chaos run on hosts) holds none of the commits the primary
// acknowledged; a failover must not promote it, even with
// --accept-single-copy. Before the fix the chaos run's failover promoted
// such a replica: every packet of the SET vanished from its records, and
// rebuilding the old primary "from the primary" as rejoin advises threw
// them away for good.
func TestFailoverRefusesReplicaOfNobody(t *testing.T) {
	ctx := context.Background()
	name := dbtest.UniqueName("s")
	g, meta, cfg := replicatedSet(t, name, 1)
	p, r := g.Primary, g.Replicas[0]
	writeSome(t, g, 3)
	// The replica as a failed seed leaves it: its own data only, no source.
	rdb := dbtest.Open(t, r.DSN, 1)
	for _, q := range []string{"STOP SLAVE", "RESET SLAVE ALL", "SET sql_log_bin = 0", "DROP DATABASE h23"} {
		if _, err := rdb.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	out := &syncBuffer{}
	f := testFailover(t, meta, name, cfg, out)
	err := f.run(ctx, Options{SingleCopy: true})
	t.Logf("failover onto a replica of nobody: %v\n%s", err, out)
	if err == nil {
		t.Error("the failover promoted a replica that replicates from nobody")
	}
	if got := metaPrimary(t, meta, name); got != p.AppDSN() {
		t.Errorf("published %s; want the primary %s to stay", sqldb.Addr(got), sqldb.Addr(p.DSN))
	}
}
