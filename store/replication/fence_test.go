package replication_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/store/dbtest"
	"github.com/hongbao-dev/hongbao/store/replication"
)

// TestFence: a primary whose only replica is down holds a commit waiting
// for a semi-sync acknowledgement (so SET GLOBAL read_only waits behind
// it) and an idle application connection. Fence returns within seconds:
// read_only is on, the waiting commit's client got an error (never "ok"),
// the idle connection was killed, and the application cannot write.
func TestFence(t *testing.T) {
	g := dbtest.StartReplicated(t, 0, 1)
	ctx := context.Background()
	app, root := dbtest.Open(t, g.Primary.AppDSN(), 4), dbtest.Open(t, g.Primary.DSN, 4)
	for _, q := range []string{"CREATE DATABASE x", "CREATE TABLE x.t (id INT PRIMARY KEY)"} {
		if _, err := app.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	idle, err := app.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	g.Replicas[0].Stop()
	waiting := make(chan error, 1)
	go func() { _, err := app.Exec("INSERT INTO x.t VALUES (1)"); waiting <- err }()
	for i := 0; ; i++ {
		var name, n string
		if err := root.QueryRow("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_wait_sessions'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		if n == "1" {
			break
		}
		if i == 100 {
			t.Fatalf("no commit waits for an acknowledgement (%s)", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	began := time.Now()
	if err := replication.Fence(fctx, root); err != nil {
		t.Fatalf("Fence: %v", err)
	}
	t.Logf("fenced in %v", time.Since(began).Round(time.Millisecond))
	select {
	case err := <-waiting:
		if err == nil {
			t.Error("the commit waiting for an acknowledgement answered ok after the fence")
		}
	case <-time.After(5 * time.Second):
		t.Error("the commit waiting for an acknowledgement still waits after the fence")
	}
	var ro int
	if err := root.QueryRow("SELECT @@GLOBAL.read_only").Scan(&ro); err != nil || ro != 1 {
		t.Errorf("read_only = %d, %v; want 1", ro, err)
	}
	if err := idle.PingContext(ctx); err == nil {
		t.Error("an idle application connection survived the fence")
	}
	if _, err := app.Exec("INSERT INTO x.t VALUES (2)"); err == nil || !strings.Contains(err.Error(), "1290") {
		t.Errorf("the application writes after the fence: %v; want error 1290 (read-only)", err)
	}
}
