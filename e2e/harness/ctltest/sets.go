package ctltest

import (
	"context"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// WaitOutbox waits until every SET's outbox is delivered, for hbctl verify.
func WaitOutbox(t testing.TB, c *clustertest.Cluster) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range append(c.Sets, c.Spares...) {
		for dbtest.Count(t, c.DB(s.Name), "SELECT COUNT(*) FROM hb_set.outbox") > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("SET %s's outbox not delivered in 30 s", s.Name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// DevGrant is what every sender of these tests is credited on its first
// send (dev_grant), so balances can be checked exactly.
const DevGrant = 1_000_000_000

// SweepAfter is the settlers' sweep delay (settle.sweep_after) of a
// cluster whose test holds a primary up under TimedLoad: production's
// 30 s. A send waiting for its debit while a group fails over (6-7 s
// with a paused primary under a loaded make test) must not be voided
// under its client (409 send_cancelled), as the test clusters' 5 s did.
const SweepAfter = 30 * time.Second

// WritableMember returns the member of g whose read_only is off (nil: none).
//
// A probe that fails (a loaded machine's member too slow for it) is
// tried again, for up to 30 s, before no member counts as writable.
func WritableMember(t *testing.T, g *dbtest.Group) *dbtest.MariaDB {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		failed := false
		for _, m := range g.Members() {
			if !m.Running() {
				continue
			}
			db, err := sqldb.Open(m.DSN, 1)
			if err != nil {
				t.Fatal(err)
			}
			p := sqldb.ProbeMember(context.Background(), db)
			db.Close()
			if p.Err == nil && p.Writable {
				return m
			}
			failed = failed || p.Err != nil
		}
		if !failed || time.Now().After(deadline) {
			return nil
		}
	}
}

// CheckFollowers fails the test unless every member of g but primary and
// gone replicates from primary, semi-synchronously, and applied all it
// wrote.
func CheckFollowers(t *testing.T, g *dbtest.Group, primary, gone *dbtest.MariaDB) {
	t.Helper()
	ctx := context.Background()
	pdb, err := sqldb.Open(primary.DSN, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()
	pos, err := replication.BinlogPos(ctx, pdb)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range g.Members() {
		if m == primary || m == gone {
			continue
		}
		db, err := sqldb.Open(m.DSN, 1)
		if err != nil {
			t.Fatal(err)
		}
		st, err := replication.ReplicaStatus(ctx, db)
		if err != nil || st.MasterPort != primary.Port || st.IORunning != "Yes" || st.SQLRunning != "Yes" {
			t.Errorf("replica on port %d: %+v %v; want replicating from port %d", m.Port, st, err, primary.Port)
		} else if err := replication.WaitApplied(ctx, db, pos, time.Minute); err != nil {
			// A minute: a replica receiving under make test's load once
			// applied a failover's backlog in more than 20 s.
			st, _ := replication.ReplicaStatus(ctx, db)
			t.Errorf("replica on port %d: %v (%+v)", m.Port, err, st)
		}
		db.Close()
	}
	on, clients, err := replication.SemiSync(ctx, pdb)
	if err != nil || !on || clients < 1 {
		t.Errorf("the new primary: semi-sync %v with %d replicas (%v); want on with one at least", on, clients, err)
	}
}
