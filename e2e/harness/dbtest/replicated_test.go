package dbtest_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/replication"
)

func status(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	var n, v string
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE ?", name).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestReplicatedPair: the application's writes on the primary reach the
// replica, which refuses them itself (read_only, no READ ONLY ADMIN);
// semi-sync waits AFTER_SYNC with the replica as its client; with the
// replica gone a commit waits (the default) until it is back.
func TestReplicatedPair(t *testing.T) {
	p := dbtest.StartReplicated(t, 0, 1)
	ctx := context.Background()
	app, root := dbtest.Open(t, p.Primary.AppDSN(), 4), dbtest.Open(t, p.Primary.DSN, 4)
	replApp, replRoot := dbtest.Open(t, p.Replicas[0].AppDSN(), 4), dbtest.Open(t, p.Replicas[0].DSN, 4)
	for _, q := range []string{"CREATE DATABASE x", "CREATE TABLE x.t (id INT PRIMARY KEY, v BIGINT)", "INSERT INTO x.t VALUES (1, 100)"} {
		if _, err := app.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	pos, err := replication.BinlogPos(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if err := replication.WaitApplied(ctx, replRoot, pos, 10*time.Second); err != nil {
		st, _ := replication.ReplicaStatus(ctx, replRoot)
		t.Fatalf("%v; replica: %+v", err, st)
	}
	var v int64
	if err := replApp.QueryRow("SELECT v FROM x.t WHERE id = 1").Scan(&v); err != nil || v != 100 {
		t.Fatalf("replica: v = %d, %v; want 100", v, err)
	}
	if _, err := replApp.Exec("INSERT INTO x.t VALUES (2, 1)"); err == nil || !strings.Contains(err.Error(), "1290") {
		t.Fatalf("app write on the replica: %v; want error 1290 (read-only)", err)
	}
	var wait, timeout string
	if err := root.QueryRow("SELECT @@rpl_semi_sync_master_wait_point, @@rpl_semi_sync_master_timeout").Scan(&wait, &timeout); err != nil {
		t.Fatal(err)
	}
	if wait != "AFTER_SYNC" || timeout != "31536000000" {
		t.Errorf("wait point %s, timeout %s ms; want AFTER_SYNC, 31536000000", wait, timeout)
	}
	if c := status(t, root, "Rpl_semi_sync_master_clients"); c != "1" {
		t.Errorf("semi-sync clients %s; want 1", c)
	}
	yes := status(t, root, "Rpl_semi_sync_master_yes_tx")
	if yes == "0" {
		t.Errorf("no commit acknowledged by the replica")
	}

	// The replica stops receiving: a commit waits, invisible, until it is back.
	if err := replication.StopIO(ctx, replRoot); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := app.Exec("UPDATE x.t SET v = 200 WHERE id = 1"); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("a commit without the replica returned (%v); want it to wait", err)
	case <-time.After(2 * time.Second):
	}
	if err := root.QueryRow("SELECT v FROM x.t WHERE id = 1").Scan(&v); err != nil || v != 100 {
		t.Fatalf("primary while waiting: v = %d, %v; want 100 (not committed in InnoDB)", v, err)
	}
	if _, err := replRoot.Exec("START SLAVE IO_THREAD"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the commit did not return after the replica came back")
	}
}

// TestReplicatedDegrades: with a timeout, a commit without the replica
// returns after it (asynchronous from then on).
func TestReplicatedDegrades(t *testing.T) {
	p := dbtest.StartReplicated(t, 300*time.Millisecond, 1)
	ctx := context.Background()
	app, root, replRoot := dbtest.Open(t, p.Primary.AppDSN(), 4), dbtest.Open(t, p.Primary.DSN, 4), dbtest.Open(t, p.Replicas[0].DSN, 4)
	if err := replication.StopIO(ctx, replRoot); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if _, err := app.Exec("CREATE DATABASE y"); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec("CREATE TABLE y.t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec("INSERT INTO y.t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d < 300*time.Millisecond || d > 10*time.Second {
		t.Errorf("commits took %v; want the timeout (300 ms) once", d)
	}
	if s := status(t, root, "Rpl_semi_sync_master_status"); s != "OFF" {
		t.Errorf("semi-sync status %s; want OFF (degraded)", s)
	}
}
