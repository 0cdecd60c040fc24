package failover

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Issue 23, finding 3: a replica must never resume acknowledging a
// primary that was failed away from. In both tests the old primary is
// alive and writable but unreachable from hbctl (the failover's dialer
// sends its address to a closed port: a partition between hbctl and it),
// so it is not fenced; an application write on it after the failover
// waits for a semi-sync acknowledgement. A replica that comes back must
// not give it one.

// TestFailoverRefusedReplicaComesBack (a): replica R2 is down (refuses
// connections) during the failover, so it is left pointing at the old
// primary; when it comes back it must not replicate from it, and the
// startup step (hbctl replica start) makes it a replica of the new
// primary instead of starting it.
func TestFailoverRefusedReplicaComesBack(t *testing.T) {
	ctx := context.Background()
	name := dbtest.UniqueName("s")
	g, meta, cfg := replicatedSet(t, name, 2)
	p, r1, r2 := g.Primary, g.Replicas[0], g.Replicas[1]
	writeSome(t, g, 3)
	r2.Stop()
	out := &syncBuffer{}
	f := testFailover(t, meta, name, cfg, out)
	f.r.Dial = cutOff(t, p)
	if err := f.run(ctx, Options{}); err != nil {
		t.Fatalf("failover: %v\n%s", err, out)
	}
	t.Logf("failover with the old primary cut off from hbctl and R2 down:\n%s", out)
	if got := metaPrimary(t, meta, name); got != r1.AppDSN() {
		t.Fatalf("published %s; want R1 %s", sqldb.Addr(got), sqldb.Addr(r1.DSN))
	}
	w := pendingWrite(t, p)
	if err := r2.RestartStopped(); err != nil {
		t.Fatal(err)
	}
	mustNotReplicateFrom(t, r2, p)
	w.mustNotCommit(t, "R2 came back after the failover", ackWindow)
	out2, err := replicaStart(t, meta, r2)
	t.Logf("the startup step, hbctl replica start: %v\n%s", err, out2)
	if err != nil {
		t.Errorf("hbctl replica start of a replica that missed a failover: %v; want it rejoined to the new primary", err)
	}
	replicatesFrom(t, r2, r1)
	w.mustNotCommit(t, "after the startup step", ackWindow)
}

// TestFailoverReplicaRestartsDuring (b): replica R2 stopped receiving for
// the failover, then its mysqld restarts before the new primary is
// chosen; it must not replicate from the old primary again (which would
// acknowledge commits the promoted replica lacks), and the failover
// makes it a replica of the new primary.
func TestFailoverReplicaRestartsDuring(t *testing.T) {
	ctx := context.Background()
	name := dbtest.UniqueName("s")
	g, meta, cfg := replicatedSet(t, name, 2)
	p, r1, r2 := g.Primary, g.Replicas[0], g.Replicas[1]
	writeSome(t, g, 3)
	out := &syncBuffer{}
	f := testFailover(t, meta, name, cfg, out)
	f.r.Dial = cutOff(t, p)
	var w *write
	f.r.Hook = func(step string) error {
		if step != StepPromote {
			return nil
		}
		w = pendingWrite(t, p)
		r2.Stop()
		if err := r2.RestartStopped(); err != nil {
			return err
		}
		mustNotReplicateFrom(t, r2, p)
		w.mustNotCommit(t, "R2 restarted during the failover", ackWindow)
		return nil
	}
	if err := f.run(ctx, Options{To: r1.AppDSN()}); err != nil {
		t.Fatalf("failover: %v\n%s", err, out)
	}
	t.Logf("failover with the old primary cut off from hbctl and R2 restarted before the promotion:\n%s", out)
	if got := metaPrimary(t, meta, name); got != r1.AppDSN() {
		t.Fatalf("published %s; want R1 %s", sqldb.Addr(got), sqldb.Addr(r1.DSN))
	}
	replicatesFrom(t, r2, r1)
	w.mustNotCommit(t, "after the failover", 0)
}

// cutOff is a dialer that sends the failover's connections to m to a
// closed port (the others where they go).
func cutOff(t *testing.T, m *dbtest.MariaDB) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return reroute(map[string]string{sqldb.Addr(m.DSN): fmt.Sprintf("127.0.0.1:%d", dbtest.FreePort(t))})
}

// reroute is a dialer that dials to[addr] instead of addr, when listed.
func reroute(to map[string]string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if a, ok := to[addr]; ok {
			addr = a
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

// write is an application commit on a primary, in flight.
type write struct {
	done chan error
	err  error
	over bool
}

// pendingWrite starts an application commit on m and waits until it
// waits for a semi-sync acknowledgement (m has no replica receiving).
func pendingWrite(t *testing.T, m *dbtest.MariaDB) *write {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	app := dbtest.Open(t, m.AppDSN(), 1)
	w := &write{done: make(chan error, 1)}
	go func() {
		_, err := app.ExecContext(ctx, "INSERT INTO h23.t (v) VALUES (-1)")
		w.done <- err
	}()
	root := dbtest.Open(t, m.DSN, 1)
	for range 200 {
		var n int
		if err := root.QueryRow("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_wait_sessions'").Scan(new(string), &n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return w
		}
		select {
		case err := <-w.done:
			t.Fatalf("the write on the old primary %s returned (%v) before waiting for an acknowledgement", sqldb.Addr(m.DSN), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("the write on %s does not wait for an acknowledgement", sqldb.Addr(m.DSN))
	return nil
}

// ackWindow is how long a test gives a wrongly replicating replica to
// acknowledge the old primary's commit (it does so within a second: a
// replica reconnects every second, MASTER_CONNECT_RETRY 1).
const ackWindow = 5 * time.Second

// mustNotCommit fails the test if the write returned success within
// window: the old primary acknowledged a commit after the failover.
func (w *write) mustNotCommit(t *testing.T, when string, window time.Duration) {
	t.Helper()
	if !w.over {
		select {
		case w.err = <-w.done:
			w.over = true
		case <-time.After(window):
		}
	}
	if w.over && w.err == nil {
		t.Errorf("%s: the old primary, failed away from, acknowledged a commit (a replica acknowledged it)", when)
	}
}

// mustNotReplicateFrom fails the test unless r's receiving thread is
// stopped (a restart does not start it).
func mustNotReplicateFrom(t *testing.T, r, old *dbtest.MariaDB) {
	t.Helper()
	st, err := replication.ReplicaStatus(context.Background(), dbtest.Open(t, r.DSN, 1))
	if err != nil {
		t.Fatal(err)
	}
	if st.IORunning != "No" {
		t.Errorf("replica %s after its restart: receiving thread %s from port %d (old primary %d); want No (nobody started it)",
			sqldb.Addr(r.DSN), st.IORunning, st.MasterPort, old.Port)
	}
}

// replicatesFrom fails the test unless r receives from primary (within
// 30 s: START SLAVE returns before its receiving thread connects).
func replicatesFrom(t *testing.T, r, primary *dbtest.MariaDB) {
	t.Helper()
	db := dbtest.Open(t, r.DSN, 1)
	var st replication.Status
	var err error
	for range 300 {
		st, err = replication.ReplicaStatus(context.Background(), db)
		if err == nil && st.MasterPort == primary.Port && st.IORunning == "Yes" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("replica %s: %+v %v; want receiving from %s", sqldb.Addr(r.DSN), st, err, sqldb.Addr(primary.DSN))
}

// TestReplicaRestartResumes: a replica restarted with no failover comes
// back with its replication stopped (nobody starts it by itself), and the
// startup step (hbctl replica start) starts it again from the published
// primary, whose commits then complete on two machines.
func TestReplicaRestartResumes(t *testing.T) {
	name := dbtest.UniqueName("s")
	g, meta, _ := replicatedSet(t, name, 1)
	p, r := g.Primary, g.Replicas[0]
	writeSome(t, g, 2)
	r.Stop()
	if err := r.RestartStopped(); err != nil {
		t.Fatal(err)
	}
	mustNotReplicateFrom(t, r, p)
	out, err := replicaStart(t, meta, r)
	t.Logf("the startup step, hbctl replica start: %v\n%s", err, out)
	if err != nil {
		t.Fatal(err)
	}
	replicatesFrom(t, r, p)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := semiSyncYes(t, p)
	if _, err := dbtest.Open(t, p.AppDSN(), 1).ExecContext(ctx, "INSERT INTO h23.t (v) VALUES (7)"); err != nil {
		t.Fatalf("a commit on the primary after the replica's restart and the startup step: %v", err)
	}
	if n := semiSyncYes(t, p); n != before+1 {
		t.Errorf("the primary counts %d commits acknowledged by a replica, %d before the commit; want one more", n, before)
	}
}

// semiSyncYes is m's Rpl_semi_sync_master_yes_tx.
func semiSyncYes(t *testing.T, m *dbtest.MariaDB) int {
	t.Helper()
	var n int
	if err := dbtest.Open(t, m.DSN, 1).QueryRow("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_yes_tx'").Scan(new(string), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRejoinNamesWhatReplicaReceived: a replica that did receive the old
// primary's commit after a failover (an operator started its replication
// by hand) holds it in its relay log, not applied yet. Rejoin must not
// throw it away unnamed (RESET SLAVE ALL drops the relay log): it applies
// what the replica received first, then refuses it, naming the errant
// transaction (a commit the old primary may have acknowledged).
func TestRejoinNamesWhatReplicaReceived(t *testing.T) {
	ctx := context.Background()
	name := dbtest.UniqueName("s")
	g, meta, cfg := replicatedSet(t, name, 2)
	p, r1, r2 := g.Primary, g.Replicas[0], g.Replicas[1]
	writeSome(t, g, 3)
	r2.Stop()
	out := &syncBuffer{}
	f := testFailover(t, meta, name, cfg, out)
	f.r.Dial = cutOff(t, p)
	if err := f.run(ctx, Options{}); err != nil {
		t.Fatalf("failover: %v\n%s", err, out)
	}
	w := pendingWrite(t, p)
	if err := r2.RestartStopped(); err != nil {
		t.Fatal(err)
	}
	// By hand, against the rule: receive only, apply nothing.
	root2 := dbtest.Open(t, r2.DSN, 1)
	if _, err := root2.Exec("START SLAVE IO_THREAD"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w.done:
		w.over, w.err = true, err
		if err != nil {
			t.Fatalf("the write on the old primary: %v; want it acknowledged by the replica started by hand", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the replica started by hand did not acknowledge the old primary's write")
	}
	pos, err := replication.BinlogPos(ctx, dbtest.Open(t, p.DSN, 1))
	if err != nil {
		t.Fatal(err)
	}
	out2 := &syncBuffer{}
	f2 := testFailover(t, meta, name, cfg, out2)
	f2.r.Dial = f.r.Dial
	err = f2.rejoinAll(ctx)
	t.Logf("hbctl set rejoin: %v\n%s", err, out2)
	if err == nil || !strings.Contains(err.Error(), sqldb.Addr(r2.DSN)+": refused") || !strings.Contains(err.Error(), pos) {
		t.Errorf("rejoin of a replica holding the old primary's acknowledged commit %s: %v; want it refused naming it", pos, err)
	}
	st, serr := replication.ReplicaStatus(ctx, root2)
	if serr == nil && st.Configured && st.MasterPort == r1.Port {
		t.Errorf("replica %s follows the new primary %s, the old primary's acknowledged commit %s dropped with its relay log", sqldb.Addr(r2.DSN), sqldb.Addr(r1.DSN), pos)
	}
}
