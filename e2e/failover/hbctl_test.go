package failover_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestFailoverKilledPrimary: SET b (a primary and 2 replicas) loses its
// primary MariaDB (kill -9) under load; hbctl set failover promotes the
// most advanced replica and points the other at it, so SET b keeps
// writing, each commit on two machines. No client sees an error (503s are
// retried), no acknowledged open is lost, no share is doubled, verify
// holds; the time SET b acknowledged no open is logged.
func TestFailoverKilledPrimary(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000_000, Replicated: []string{"b"}, Replicas: 2, SweepAfter: ctltest.SweepAfter})
	b := c.Set("b")
	l, killed, took := failoverUnderLoad(t, c, b.Group.Primary, []string{"set", "failover", "b"},
		"does not answer", "promoted 127.0.0.1:", "1 replica(s) follow it")
	m := c.Follow(t, "b")
	if m == b.Group.Primary {
		t.Fatalf("SET b's MySQL after the failover is still its old primary")
	}
	ctltest.CheckFollowers(t, b.Group, m, b.Group.Primary)
	gap := l.Check(t, c, "b", killed)
	t.Logf("SET b without acknowledged opens for %v after its primary was killed (hbctl set failover took %v)",
		gap.Round(time.Millisecond), took.Round(time.Millisecond))
}

// failoverUnderLoad runs timedLoad with 16 clients, kills primary (kill
// -9) once the load is going (3 s and 40 opens acknowledged, or 30 s),
// runs hbctl with args and checks that its report mentions each of want,
// lets the load go on for 4 s and 80 more acknowledged opens (or 30 s)
// and stops it. It returns the load, when the primary was killed and how
// long hbctl took. The counts, not the times, are what Check needs: under
// a loaded make test the load once took its first 3 s to send, and 4 s
// after the failover gave SET a 45 opens.
func failoverUnderLoad(t *testing.T, c *clustertest.Cluster, primary *dbtest.MariaDB, args []string, want ...string) (*ctltest.TimedLoad, time.Time, time.Duration) {
	t.Helper()
	l := &ctltest.TimedLoad{}
	stop := make(chan struct{})
	wg := l.Run(c, 16, stop)
	waitAcked(l, 40, 3*time.Second, 30*time.Second)
	primary.Stop()
	killed := time.Now()
	out := c.MustCtl(t, args...)
	took := time.Since(killed)
	t.Logf("hbctl %s (%v):\n%s", strings.Join(args, " "), took.Round(time.Millisecond), out)
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("the report of hbctl %s lacks %q:\n%s", strings.Join(args, " "), w, out)
		}
	}
	waitAcked(l, l.Acked()+80, 4*time.Second, 30*time.Second)
	close(stop)
	wg.Wait()
	return l, killed, took
}

// waitAcked waits at least least and until l has acknowledged n opens, or
// most has passed.
func waitAcked(l *ctltest.TimedLoad, n int, least, most time.Duration) {
	start := time.Now()
	time.Sleep(least)
	for l.Acked() < n && time.Since(start) < most {
		time.Sleep(100 * time.Millisecond)
	}
}

// details reads every share visible in a SET database's detail tables.
// A table whose metadata lock is held (on a resumed old primary, a
// CREATE TABLE of the store that waits for a semi-sync acknowledgement
// nobody sends holds it for good) is named and left out after 5 s: a
// table created by a DDL still in flight holds no share anyone saw.
func details(t *testing.T, db *sql.DB) map[[2]int64]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = 5"); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.QueryContext(ctx, `SELECT CONCAT(table_schema, '.', table_name) FROM information_schema.tables
		WHERE table_schema LIKE 'db\_%' AND table_name LIKE '%\_detail'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var s string
		rows.Scan(&s)
		tables = append(tables, s)
	}
	rows.Close()
	out := map[[2]int64]int64{}
	for _, tb := range tables {
		rows, err := conn.QueryContext(ctx, "SELECT packet_id, user_id, amount FROM "+tb)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1205 {
			t.Logf("%s: its metadata lock is held (a DDL in flight): left out", tb)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var p, u, a int64
			rows.Scan(&p, &u, &a)
			out[[2]int64{p, u}] = a
		}
		rows.Close()
	}
	return out
}

// TestFailoverPausedPrimary: SET b's primary (2 replicas) is paused
// (SIGSTOP) under load and failed over without being reachable; SET b
// keeps writing on the new primary and its other replica; then it goes on
// (SIGCONT). It commits nothing after the promotion: every share it shows
// is on the new primary with the same amount, and what it has in its
// binary log beyond the new primary is exactly what rejoin names as
// errant (or, when there is nothing, rejoin makes it a replica that
// follows the new primary).
func TestFailoverPausedPrimary(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000_000, Replicated: []string{"b"}, Replicas: 2, SweepAfter: ctltest.SweepAfter})
	b := c.Set("b")
	l := &ctltest.TimedLoad{}
	stop := make(chan struct{})
	wg := l.Run(c, 16, stop)
	waitAcked(l, 40, 3*time.Second, 30*time.Second)
	if err := b.Group.Primary.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	out := c.MustCtl(t, "set", "failover", "b")
	t.Logf("hbctl set failover b with its primary paused (%v):\n%s", time.Since(paused).Round(time.Millisecond), out)
	if !strings.Contains(out, "1 replica(s) follow it") {
		t.Errorf("failover's report lacks the other replica following:\n%s", out)
	}
	waitAcked(l, l.Acked()+80, 4*time.Second, 30*time.Second)
	close(stop)
	wg.Wait()
	ctltest.CheckFollowers(t, b.Group, c.Follow(t, "b"), b.Group.Primary)
	gap := l.Check(t, c, "b", paused)
	t.Logf("SET b without acknowledged opens for %v after its primary was paused", gap.Round(time.Millisecond))

	oldDB, err := sqldb.Open(b.Group.Primary.DSN, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer oldDB.Close()
	newDB := c.DB("b")
	if err := b.Group.Primary.Resume(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	oldShares, newShares := details(t, oldDB), details(t, newDB)
	for k, a := range oldShares {
		if got, ok := newShares[k]; !ok || got != a {
			t.Errorf("the old primary shows packet %d user %d: %d fen; the new primary %d (present %v)", k[0], k[1], a, got, ok)
		}
	}
	ctx := context.Background()
	mine, err := replication.BinlogState(ctx, oldDB)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := replication.BinlogState(ctx, newDB)
	if err != nil {
		t.Fatal(err)
	}
	errant := replication.Errant(mine, theirs)
	var waiting string
	oldDB.QueryRow("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_wait_sessions'").Scan(new(string), &waiting)
	t.Logf("old primary after SIGCONT: %d shares visible (all on the new primary), errant %q, sessions waiting for an acknowledgement %s",
		len(oldShares), replication.List(errant, 20), waiting)

	out, err = c.Ctl("set", "rejoin", "b")
	t.Logf("hbctl set rejoin b: %v\n%s", err, out)
	if len(errant) > 0 {
		if err == nil || !strings.Contains(out, replication.List(errant, 20)) || !strings.Contains(out, "errant") {
			t.Fatalf("rejoin with errant %s: want a refusal naming them; got %v\n%s", replication.List(errant, 20), err, out)
		}
		return
	}
	if err != nil {
		t.Fatalf("rejoin without errant transactions: %v\n%s", err, out)
	}
	if _, err := newDB.Exec("CREATE DATABASE hb_rejoin_probe"); err != nil {
		t.Fatal(err)
	}
	pos, err := replication.BinlogPos(ctx, newDB)
	if err != nil {
		t.Fatal(err)
	}
	if err := replication.WaitApplied(ctx, oldDB, pos, 20*time.Second); err != nil {
		t.Fatalf("the rejoined old primary does not follow the new one: %v", err)
	}
}

// TestReplicaDown: with the default semi-sync timeout (wait), SET b's
// writes stall while its replica is down: an open is answered 503 and
// is not visible on the primary, whose commit waits in its binary log;
// when the replica is back the commit completes and the retried open
// gets exactly the share that was committed, on both machines.
func TestReplicaDown(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000_000, Replicated: []string{"b"}})
	b := c.Set("b")
	bs := ctltest.BucketsOf(t, c, "b")
	id, shares := ctltest.SendInto(t, c, bs[0], 3, 1)
	b.Group.Replicas[0].Stop()
	u := ctltest.User()
	began := time.Now()
	o := c.Client.Open(u, id.String())
	if o.Status != http.StatusServiceUnavailable || (o.Code != "busy" && o.Code != "unavailable") {
		t.Fatalf("open with SET b's replica down: %v; want 503 busy or unavailable", o)
	}
	t.Logf("an open with the replica down: %d %s after %v", o.Status, o.Code, time.Since(began).Round(time.Millisecond))
	primary := c.DB("b")
	if p := dbtest.ReadPacket(t, primary, id); p == nil || p.Shares[u] != 0 || len(p.Shares) != 1 {
		t.Fatalf("packet %s on the primary while the replica is down: %+v; want only the first share", id, p)
	}
	var waiting int
	primary.QueryRow("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_wait_sessions'").Scan(new(string), &waiting)
	if waiting < 1 {
		t.Errorf("%d sessions wait for the replica's acknowledgement; want at least 1", waiting)
	}
	if err := b.Group.Replicas[0].Restart(); err != nil {
		t.Fatal(err)
	}
	o = c.Client.Retrying(30*time.Second).Open(u, id.String())
	if o.Status != http.StatusOK || (o.Body.Status != hongbao.Opened && o.Body.Status != hongbao.AlreadyOpened) {
		t.Fatalf("open after the replica came back: %v", o)
	}
	shares[u] = o.Body.Amount
	p := dbtest.CheckPacket(t, primary, id)
	ctltest.SameShares(t, "the packet on the primary", p.Shares, shares)
	if len(p.Shares) != 2 {
		t.Errorf("packet %s has %d shares; want 2 (one before, one while the replica was down)", id, len(p.Shares))
	}
	replica, err := sqldb.Open(b.Group.Replicas[0].DSN, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer replica.Close()
	pos, err := replication.BinlogPos(context.Background(), primary)
	if err != nil {
		t.Fatal(err)
	}
	if err := replication.WaitApplied(context.Background(), replica, pos, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	ctltest.SameShares(t, "the packet on the replica", dbtest.ReadPacket(t, replica, id).Shares, shares)
	ctltest.WaitOutbox(t, c)
	c.CheckInvariants(t)
}

// semiSync is a semi-sync status counter of db's server:
// Rpl_semi_sync_master_wait_sessions (commits waiting for an
// acknowledgement), Rpl_semi_sync_master_no_tx (commits no replica
// acknowledged).
func semiSync(t *testing.T, db *sql.DB, name string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE ?", name).Scan(new(string), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFailoverSingleReplica: the policy of a SET with one replica. By
// default a failover leaves the promoted primary waiting for a replica:
// an open on SET b is answered 503 and its commit waits, unseen, until
// rejoin makes the old primary its replica; then the retried open gets
// exactly the committed share. With --accept-single-copy the promoted
// lone primary writes at once (asynchronously, on one machine) and rejoin
// makes it wait for acknowledgements again (wait_no_slave back on,
// semi-sync on once its replica is connected).
func TestFailoverSingleReplica(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000_000, Replicated: []string{"b"}})
	g := c.Set("b").Group
	p, r := g.Primary, g.Replicas[0]
	bs := ctltest.BucketsOf(t, c, "b")
	id, shares := ctltest.SendInto(t, c, bs[0], 10, 1)

	// Default: wait.
	p.Stop()
	out := c.MustCtl(t, "set", "failover", "b")
	t.Logf("hbctl set failover b:\n%s", out)
	if !strings.Contains(out, "no replica follows it") || !strings.Contains(out, "stall") {
		t.Errorf("failover of a SET with one replica does not warn that its writes stall:\n%s", out)
	}
	if c.Follow(t, "b") != r {
		t.Fatal("SET b's MySQL is not its replica after the failover")
	}
	time.Sleep(2 * time.Second) // the servers follow within a second
	u := ctltest.User()
	o := c.Client.Open(u, id.String())
	if o.Status != http.StatusServiceUnavailable {
		t.Fatalf("open on the lone promoted primary: %v; want 503 (its commit waits for a replica)", o)
	}
	if n := semiSync(t, c.DB("b"), "Rpl_semi_sync_master_wait_sessions"); n < 1 {
		t.Errorf("%d commits wait for an acknowledgement on the lone primary; want 1 at least", n)
	}
	if got := dbtest.ReadPacket(t, c.DB("b"), id).Shares; len(got) != 1 {
		t.Errorf("shares visible while the commit waits: %v; want only the first", got)
	}
	// The old primary comes back as a replica, as scripts/dev.sh brings back a
	// failover's old primary: its crash recovery drops what no replica
	// acknowledged (a commit that waited at its kill), which rejoin would
	// refuse as errant.
	if err := p.RestartAsReplica(); err != nil {
		t.Fatal(err)
	}
	out = c.MustCtl(t, "set", "rejoin", "b")
	t.Logf("hbctl set rejoin b:\n%s", out)
	if !strings.Contains(out, "from GTID \"0-") {
		t.Errorf("rejoin does not name the GTID position the old primary replicates from:\n%s", out)
	}
	o = c.Client.Retrying(30*time.Second).Open(u, id.String())
	if o.Status != http.StatusOK || (o.Body.Status != hongbao.Opened && o.Body.Status != hongbao.AlreadyOpened) {
		t.Fatalf("open after rejoin: %v", o)
	}
	shares[u] = o.Body.Amount
	ctltest.SameShares(t, "after rejoin", dbtest.CheckPacket(t, c.DB("b"), id).Shares, shares)
	ctltest.CheckFollowers(t, g, r, nil)

	// --accept-single-copy: the lone primary writes on one machine.
	r.Stop()
	out = c.MustCtl(t, "set", "failover", "b", "--accept-single-copy")
	t.Logf("hbctl set failover b --accept-single-copy:\n%s", out)
	if c.Follow(t, "b") != p || !strings.Contains(out, "--accept-single-copy: it replicates asynchronously") {
		t.Fatalf("failover --accept-single-copy: SET b's MySQL is not the old primary, or no warning:\n%s", out)
	}
	time.Sleep(2 * time.Second)
	unacked := semiSync(t, c.DB("b"), "Rpl_semi_sync_master_no_tx")
	u = ctltest.User()
	began := time.Now()
	o = c.Client.Retrying(20*time.Second).Open(u, id.String())
	if o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
		t.Fatalf("open on the lone primary with --accept-single-copy: %v", o)
	}
	t.Logf("opened on the lone primary %v after the failover", time.Since(began).Round(time.Millisecond))
	shares[u] = o.Body.Amount
	if n := semiSync(t, c.DB("b"), "Rpl_semi_sync_master_no_tx"); n <= unacked {
		t.Errorf("the lone primary counts %d commits without an acknowledgement, %d before the open; want more (asynchronous)", n, unacked)
	}
	// As above: killed while primary (a settler's delete may have waited
	// for p's acknowledgement), it comes back as a replica. Restarted as
	// the primary it was, it committed such a transaction (0-2-30, in a
	// clean-clone check) and rejoin refused it.
	if err := r.RestartAsReplica(); err != nil {
		t.Fatal(err)
	}
	out = c.MustCtl(t, "set", "rejoin", "b")
	t.Logf("hbctl set rejoin b:\n%s", out)
	var wait int
	if err := c.DB("b").QueryRow("SELECT @@GLOBAL.rpl_semi_sync_master_wait_no_slave").Scan(&wait); err != nil || wait != 1 {
		t.Errorf("wait_no_slave after rejoin: %d, %v; want 1", wait, err)
	}
	u = ctltest.User()
	o = c.Client.Retrying(20*time.Second).Open(u, id.String())
	if o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
		t.Fatalf("open after the second rejoin: %v", o)
	}
	shares[u] = o.Body.Amount
	ctltest.CheckFollowers(t, g, p, nil)
	ctltest.SameShares(t, "at the end", dbtest.CheckPacket(t, c.DB("b"), id).Shares, shares)
	ctltest.WaitOutbox(t, c)
	c.CheckInvariants(t)
}
