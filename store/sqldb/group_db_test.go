package sqldb_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestOpenGroup: a pool on a replicated group follows a promoted replica
// (writable, a higher failover epoch) without being told, although the old
// primary was never fenced and is still writable (as a paused primary that
// goes on); a pool opened afterwards finds the new primary too; and when
// the new primary is lost the pool does not go back to the old one.
func TestOpenGroup(t *testing.T) {
	g := dbtest.StartReplicated(t, 0, 1)
	old, next := g.Primary, g.Replicas[0]
	members := []string{addrOf(old), addrOf(next)}
	ctx := t.Context()
	type move struct {
		member string
		epoch  int64
	}
	moves := make(chan move, 10)
	onMove := sqldb.OnMove(func(member string, epoch int64, err error) {
		if err != nil {
			t.Errorf("move to %s (epoch %d): %v", member, epoch, err)
		}
		moves <- move{member, epoch}
	})
	db, err := sqldb.OpenGroup(ctx, old.AppDSN()+"hb_meta", members, 4, true, onMove)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if p := port(t, db); p != old.Port {
		t.Fatalf("pool on port %d, want the primary's %d", p, old.Port)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}

	promoteUnfenced(t, next, 10)
	waitPort(t, db, next.Port)
	select {
	case m := <-moves:
		if want := (move{addrOf(next), 10}); m != want {
			t.Errorf("the pool reported a move to %+v, want %+v", m, want)
		}
	case <-time.After(5 * time.Second):
		t.Error("the pool moved to the promoted replica without reporting it")
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatalf("write on the promoted replica: %v", err)
	}
	later, err := sqldb.OpenGroup(ctx, old.AppDSN()+"hb_meta", members, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	if p := port(t, later); p != next.Port {
		t.Errorf("a pool opened after the failover is on port %d, want the promoted %d", p, next.Port)
	}

	// The new primary lost: the old one, writable with a lower epoch, is
	// not chosen.
	next.Stop()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		var p int
		if err := db.QueryRowContext(ctx, "SELECT @@port").Scan(&p); err == nil {
			t.Fatalf("with the promoted primary down the pool reached port %d (the old primary is %d)", p, old.Port)
		}
	}
	if len(moves) != 0 {
		t.Errorf("the pool reported a move after the first: %+v", <-moves)
	}
}

// promoteUnfenced is a failover that could not fence the old primary:
// replica m stops receiving from it, applies what it has, is stamped with
// epoch and promoted.
func promoteUnfenced(t *testing.T, m *dbtest.MariaDB, epoch int64) {
	t.Helper()
	ctx := t.Context()
	rdb, err := sqldb.Open(m.DSN, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if err := replication.StopIO(ctx, rdb); err != nil {
		t.Fatal(err)
	}
	stamp := func(ctx context.Context, db *sql.DB) error { return sqldb.StampEpoch(ctx, db, epoch, addrOf(m)) }
	if err := replication.Promote(ctx, rdb, 0, false, stamp); err != nil {
		t.Fatal(err)
	}
}

// addrOf is a test MariaDB's address.
func addrOf(m *dbtest.MariaDB) string { return fmt.Sprintf("127.0.0.1:%d", m.Port) }

// waitPort waits up to 5 s until db's connections reach port.
func waitPort(t *testing.T, db *sql.DB, want int) {
	t.Helper()
	var p int
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if err := db.QueryRow("SELECT @@port").Scan(&p); err == nil && p == want {
			return
		}
	}
	t.Fatalf("the pool did not move to port %d within 5 s (on %d)", want, p)
}
