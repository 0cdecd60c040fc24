package failover_test

import (
	"database/sql"
	"strconv"
	"strings"
	"testing"

	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestFailoverPicksARestartedReplica: SET b has two replicas. R2 stops
// receiving; R1 acknowledges 20 commits it does not apply (its applier
// stopped), then restarts and is not started yet (--skip-slave-start): what
// it acknowledged is in its relay log only, and it reports no received
// position. The primary dies. hbctl set failover applies R1's relay log
// first and promotes it, the most advanced: every acknowledged commit is
// on the new primary (before: R1's received position read empty, R2 was
// promoted and the 20 commits lost).
func TestFailoverPicksARestartedReplica(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Replicated: []string{"b"}, Replicas: 2})
	g := c.Set("b").Group
	r1, r2 := g.Replicas[0], g.Replicas[1]
	app := dbtest.Open(t, g.Primary.AppDSN(), 2)
	for _, q := range []string{"CREATE DATABASE x", "CREATE TABLE x.t (id INT PRIMARY KEY, v BIGINT)", "INSERT INTO x.t VALUES (0, 0)"} {
		if _, err := app.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	exec := func(m *dbtest.MariaDB, q string) {
		t.Helper()
		db, err := sql.Open("mysql", m.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	exec(r2, "STOP SLAVE IO_THREAD")
	exec(r1, "STOP SLAVE SQL_THREAD")
	for id := 1; id <= 20; id++ { // each acknowledged by R1 alone
		if _, err := app.Exec("INSERT INTO x.t VALUES (?, ?)", id, id*100); err != nil {
			t.Fatal(err)
		}
	}
	r1.Stop()
	if err := r1.RestartStopped(); err != nil {
		t.Fatal(err)
	}
	g.Primary.Stop()
	out := c.MustCtl(t, "set", "failover", "b")
	t.Logf("hbctl set failover b:\n%s", out)
	if c.Follow(t, "b") != r1 {
		t.Fatalf("the promoted primary is not R1, the replica that acknowledged every commit:\n%s", out)
	}
	var n int
	if err := c.DB("b").QueryRow("SELECT COUNT(*) FROM x.t WHERE id BETWEEN 1 AND 20").Scan(&n); err != nil || n != 20 {
		t.Fatalf("the new primary holds %d of the 20 acknowledged commits (%v)", n, err)
	}
	if !strings.Contains(out, "promoted 127.0.0.1:"+strconv.Itoa(r1.Port)) {
		t.Errorf("the report does not name R1 as promoted:\n%s", out)
	}
}
