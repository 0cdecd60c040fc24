package replication_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/replication"
)

// acked commits n rows (ids from, from+1, ...) on the primary through
// the application's account, each in its own transaction, and returns
// the ids whose commit returned: acknowledged by a semi-sync replica.
func acked(t *testing.T, app *sql.DB, from, n int) []int {
	t.Helper()
	var ids []int
	for id := from; id < from+n; id++ {
		if _, err := app.Exec("INSERT INTO x.t VALUES (?, ?)", id, id*100); err != nil {
			t.Fatalf("insert %d: %v", id, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// failOver does what hbctl set failover does with a dead primary: the
// replica's receiving thread stopped, everything it received applied
// (MASTER_GTID_WAIT on its own Gtid_IO_Pos), promoted.
func failOver(t *testing.T, ctx context.Context, db *sql.DB) {
	t.Helper()
	if err := replication.StopIO(ctx, db); err != nil {
		t.Fatal(err)
	}
	st, err := replication.ReplicaStatus(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := replication.WaitApplied(ctx, db, st.IOPos, 30*time.Second); err != nil {
		t.Fatalf("replica did not apply what it received (%+v): %v", st, err)
	}
	if err := replication.Promote(ctx, db, 0, false, nil); err != nil {
		t.Fatal(err)
	}
}

// missing returns the ids of want that db's x.t lacks or holds with
// another value.
func missing(t *testing.T, db *sql.DB, want []int) []int {
	t.Helper()
	var lost []int
	for _, id := range want {
		var v int
		err := db.QueryRow("SELECT v FROM x.t WHERE id = ?", id).Scan(&v)
		if err == sql.ErrNoRows || (err == nil && v != id*100) {
			lost = append(lost, id)
		} else if err != nil {
			t.Fatalf("read %d: %v", id, err)
		}
	}
	return lost
}

// TestReplicaRestartKeepsAcknowledged (issue 23, finding 7): commits
// acknowledged by a replica whose applier lags (its SQL thread stopped:
// they are in its relay log only) survive a kill -9 and restart of the
// replica followed by the loss of the primary (kill -9, never back): the
// replica promoted after its restart has every one of them. A client was
// told "committed" for each only once the replica had it; a restart must
// not make the replica forget it.
func TestReplicaRestartKeepsAcknowledged(t *testing.T) {
	g := dbtest.StartReplicated(t, 0, 1)
	ctx := context.Background()
	app := dbtest.Open(t, g.Primary.AppDSN(), 4)
	r := g.Replicas[0]
	for _, q := range []string{"CREATE DATABASE x", "CREATE TABLE x.t (id INT PRIMARY KEY, v BIGINT)"} {
		if _, err := app.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	want := acked(t, app, 1, 5) // applied on the replica
	replRoot := dbtest.Open(t, r.DSN, 2)
	pos, err := replication.BinlogPos(ctx, dbtest.Open(t, g.Primary.DSN, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := replication.WaitApplied(ctx, replRoot, pos, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := replRoot.Exec("STOP SLAVE SQL_THREAD"); err != nil {
		t.Fatal(err)
	}
	// In the replica's relay log only, over two of its files.
	want = append(want, acked(t, app, 6, 10)...)
	if _, err := replRoot.Exec("FLUSH RELAY LOGS"); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec("CREATE TABLE x.u (id INT PRIMARY KEY)"); err != nil { // DDL: a GTID of its own, no BEGIN
		t.Fatal(err)
	}
	want = append(want, acked(t, app, 16, 10)...)
	replRoot.Close()

	r.Stop()
	g.Primary.Stop() // lost for good
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	db := dbtest.Open(t, r.DSN, 2)
	failOver(t, ctx, db)
	if lost := missing(t, db, want); len(lost) > 0 {
		t.Fatalf("the promoted replica lacks %d of %d acknowledged commits after its restart: ids %v", len(lost), len(want), lost)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM x.t").Scan(&n); err != nil || n != len(want) {
		t.Fatalf("promoted replica holds %d rows (%v); want %d", n, err, len(want))
	}
	if _, err := dbtest.Open(t, r.AppDSN(), 1).Exec("INSERT INTO x.u VALUES (1)"); err != nil {
		t.Fatalf("the promoted replica does not take writes: %v", err)
	}
}

// TestSetPowerLoss (issue 23, finding 7): a whole replicated group loses
// power at once under load: its primary and both replicas killed -9 at
// the same instant (none closes a socket), one replica's applier lagging
// (its SQL thread stopped: acknowledged commits in its relay log only).
// Restarted in their roles (the primary as the primary, each replica
// applying its relay log before replicating again), every commit a client
// was told of is on every member, and the group replicates and
// acknowledges again.
func TestSetPowerLoss(t *testing.T) {
	g := dbtest.StartReplicated(t, 0, 2)
	ctx := context.Background()
	app := dbtest.Open(t, g.Primary.AppDSN(), 16)
	for _, q := range []string{"CREATE DATABASE x", "CREATE TABLE x.t (id INT PRIMARY KEY, v BIGINT)"} {
		if _, err := app.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	want := load(t, app, 8, func() {
		time.Sleep(300 * time.Millisecond)
		lagging := dbtest.Open(t, g.Replicas[1].DSN, 1)
		if _, err := lagging.Exec("STOP SLAVE SQL_THREAD"); err != nil {
			t.Error(err)
		}
		lagging.Close()
		time.Sleep(700 * time.Millisecond)
		var wg sync.WaitGroup
		for _, m := range g.Members() {
			wg.Go(m.Stop)
		}
		wg.Wait()
	})
	t.Logf("%d commits acknowledged before the power loss", len(want))
	if len(want) < 50 {
		t.Fatalf("only %d commits acknowledged under load; want 50 at least for the test to mean something", len(want))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(g.Members()))
	for i, m := range g.Members() {
		wg.Go(func() { errs[i] = m.Restart() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	primary := dbtest.Open(t, g.Primary.DSN, 2)
	if lost := missing(t, primary, want); len(lost) > 0 {
		t.Fatalf("the restarted primary lacks %d of %d acknowledged commits: %v", len(lost), len(want), lost)
	}
	// Replicating and acknowledging again: a new commit returns, and
	// every member has everything the primary has.
	if _, err := dbtest.Open(t, g.Primary.AppDSN(), 1).Exec("INSERT INTO x.t VALUES (0, 0)"); err != nil {
		t.Fatal(err)
	}
	want = append(want, 0)
	pos, err := replication.BinlogPos(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range g.Replicas {
		db := dbtest.Open(t, r.DSN, 2)
		if err := replication.WaitApplied(ctx, db, pos, 60*time.Second); err != nil {
			st, _ := replication.ReplicaStatus(ctx, db)
			t.Fatalf("replica %d does not replicate after the power loss (%+v): %v", i, st, err)
		}
		if lost := missing(t, db, want); len(lost) > 0 {
			t.Errorf("replica %d lacks %d of %d acknowledged commits: %v", i, len(lost), len(want), lost)
		}
		if on, clients, err := replication.SemiSync(ctx, primary); err != nil || !on || clients != 2 {
			t.Errorf("primary's semi-sync after the power loss: on %v, %d clients, %v; want on, 2", on, clients, err)
		}
	}
}

// load runs clients goroutines committing rows on app until they fail
// (their server was killed), with during running meanwhile, and returns
// the ids of the commits that returned.
func load(t *testing.T, app *sql.DB, clients int, during func()) []int {
	t.Helper()
	var mu sync.Mutex
	var ok []int
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := 1; ; i++ {
				id := c*1_000_000 + i
				if _, err := app.Exec("INSERT INTO x.t VALUES (?, ?)", id, id*100); err != nil {
					return
				}
				mu.Lock()
				ok = append(ok, id)
				mu.Unlock()
			}
		})
	}
	during()
	wg.Wait()
	return ok
}

// TestFailoverToAReplicaNotStartedYet (issue 23, finding 7): the replica
// restarted and nobody started its replication yet (hbctl replica start:
// both threads stopped, its relay log holding acknowledged commits it has
// not applied) when the primary is lost. The failover's promotion applies
// the relay log before it forgets the replica's replication (RESET SLAVE
// ALL discards the relay log).
func TestFailoverToAReplicaNotStartedYet(t *testing.T) {
	g := dbtest.StartReplicated(t, 0, 1)
	ctx := context.Background()
	app := dbtest.Open(t, g.Primary.AppDSN(), 4)
	r := g.Replicas[0]
	for _, q := range []string{"CREATE DATABASE x", "CREATE TABLE x.t (id INT PRIMARY KEY, v BIGINT)"} {
		if _, err := app.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	replRoot := dbtest.Open(t, r.DSN, 1)
	if _, err := replRoot.Exec("STOP SLAVE SQL_THREAD"); err != nil {
		t.Fatal(err)
	}
	want := acked(t, app, 1, 10)
	replRoot.Close()
	r.Stop()
	g.Primary.Stop()
	if err := r.RestartStopped(); err != nil {
		t.Fatal(err)
	}
	db := dbtest.Open(t, r.DSN, 2)
	failOver(t, ctx, db)
	if lost := missing(t, db, want); len(lost) > 0 {
		t.Fatalf("the promoted replica lacks %d of %d acknowledged commits: ids %v", len(lost), len(want), lost)
	}
}

// TestReplicaRestartsWithItsSlavePosBehind: a replica killed between a
// DDL's commit and MariaDB's separate record of its GTID comes back with
// gtid_slave_pos behind its binary log (seen in CI: "An attempt was made
// to binlog GTID 0-1-22 which would create an out-of-order sequence
// number with existing GTID 0-1-22", replication stopped for good and
// the primary's semi-sync commits waiting). Its restart takes what its
// binary log says it applied: it replicates and acknowledges again, and
// applies each later commit once.
func TestReplicaRestartsWithItsSlavePosBehind(t *testing.T) {
	g := dbtest.StartReplicated(t, 0, 1)
	ctx := context.Background()
	app := dbtest.Open(t, g.Primary.AppDSN(), 2)
	primary := dbtest.Open(t, g.Primary.DSN, 1)
	r := g.Replicas[0]
	for _, q := range []string{"CREATE DATABASE x", "CREATE TABLE x.t (id INT PRIMARY KEY, v BIGINT)"} {
		if _, err := app.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	want := acked(t, app, 1, 3)
	before, err := replication.BinlogPos(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec("CREATE TABLE x.u (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	after, err := replication.BinlogPos(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	replRoot := dbtest.Open(t, r.DSN, 1)
	if err := replication.WaitApplied(ctx, replRoot, after, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// What the crash leaves: the DDL in the replica's binary log and
	// data, its GTID missing from gtid_slave_pos.
	for _, q := range []string{"STOP SLAVE", "SET GLOBAL gtid_slave_pos = '" + before + "'"} {
		if _, err := replRoot.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	replRoot.Close()
	r.Stop()
	if err := r.Restart(); err != nil {
		t.Fatalf("replica restart with gtid_slave_pos %s behind its binary log %s: %v", before, after, err)
	}
	want = append(want, acked(t, app, 4, 3)...) // each waits for the replica's acknowledgement
	end, err := replication.BinlogPos(ctx, primary)
	if err != nil {
		t.Fatal(err)
	}
	db := dbtest.Open(t, r.DSN, 1)
	if err := replication.WaitApplied(ctx, db, end, 20*time.Second); err != nil {
		st, _ := replication.ReplicaStatus(ctx, db)
		t.Fatalf("the restarted replica does not replicate (%+v): %v", st, err)
	}
	if lost := missing(t, db, want); len(lost) > 0 {
		t.Fatalf("the replica lacks ids %v", lost)
	}
	if got, _ := replication.SlavePos(ctx, db); got != end {
		t.Errorf("replica's gtid_slave_pos %q; want %q", got, end)
	}
}

// TestKilledPrimaryDropsWhatNoReplicaAcknowledged: a primary killed -9
// while commits wait for an acknowledgement (its replica's receiving
// thread stopped), restarted as a replica as a failover's old primary
// is, drops them from its binary log and its tables: what it keeps is
// what its replica acknowledged, so that rejoin finds nothing errant and
// no rebuild is needed. MariaDB 10.11.14 kept them (committed, errant)
// without init_rpl_role=SLAVE (replication.RoleArg).
func TestKilledPrimaryDropsWhatNoReplicaAcknowledged(t *testing.T) {
	g := dbtest.StartReplicated(t, 0, 1)
	ctx := context.Background()
	app := dbtest.Open(t, g.Primary.AppDSN(), 8)
	for _, q := range []string{"CREATE DATABASE x", "CREATE TABLE x.t (id INT PRIMARY KEY, v BIGINT)"} {
		if _, err := app.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	want := acked(t, app, 1, 5)
	root := dbtest.Open(t, g.Primary.DSN, 1)
	acknowledged, err := replication.BinlogPos(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	replica := dbtest.Open(t, g.Replicas[0].DSN, 1)
	if err := replication.WaitApplied(ctx, replica, acknowledged, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := replication.StopIO(ctx, replica); err != nil {
		t.Fatal(err)
	}
	for id := 100; id < 103; id++ { // each waits for an acknowledgement nobody sends
		go func() { _, _ = app.Exec("INSERT INTO x.t VALUES (?, ?)", id, id*100) }()
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		pos, err := replication.BinlogPos(ctx, root)
		if err != nil {
			t.Fatal(err)
		}
		if pos != acknowledged {
			break // in its binary log, waiting
		}
		if time.Now().After(deadline) {
			t.Fatal("no commit reached the binary log to wait for its acknowledgement")
		}
	}
	root.Close()
	app.Close()
	g.Primary.Stop()
	if err := g.Primary.RestartAsReplica(); err != nil {
		t.Fatal(err)
	}
	old := dbtest.Open(t, g.Primary.DSN, 1)
	pos, err := replication.BinlogPos(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := old.QueryRow("SELECT COUNT(*) FROM x.t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if pos != acknowledged || n != len(want) {
		t.Errorf("the old primary restarted as a replica is at %s with %d rows; want %s (what its replica acknowledged) and %d rows",
			pos, n, acknowledged, len(want))
	}
	if lost := missing(t, old, want); len(lost) > 0 {
		t.Errorf("it lost acknowledged commits: %v", lost)
	}
}
