package failover

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestHungHolderLosesCoreLock: an actor holding the core failover lock
// that hangs (SIGSTOP: its kernel still answers, its sessions only go
// quiet) loses the lock once its sessions are idle for the operator's
// wait_timeout (Reparenter.Idle, a minute in production, 2 s here), so
// another actor can fail over; a live holder keeps it however long it
// holds it. Before operator sessions had a wait_timeout: held after 10 s
// (MariaDB's default is 8 h). Issue 25, finding 1.
func TestHungHolderLosesCoreLock(t *testing.T) {
	ctx := context.Background()
	ms := startMariaDBs(t, 1)
	r := testReparenter(configs.Replication{AdminUser: "root"}, &syncBuffer{})
	r.Idle = 2 * time.Second
	other := dbtest.Open(t, ms[0].DSN, 1)
	free := func() bool {
		t.Helper()
		var f sql.NullInt64
		if err := other.QueryRow("SELECT IS_FREE_LOCK(?)", coreLockKey).Scan(&f); err != nil {
			t.Fatal(err)
		}
		return f.Int64 == 1
	}

	live, err := r.LockCore(ctx, []string{ms[0].DSN})
	if err != nil {
		t.Fatal(err)
	}
	// Three wait_timeouts of a live holder's quiet: its keeper keeps
	// the sessions busy.
	time.Sleep(3 * r.Idle)
	if err := live.Held(ctx); err != nil || free() {
		t.Fatalf("a live holder's lock after %v: %v (free %v); want held", 3*r.Idle, err, free())
	}
	live.Release()

	hung, err := r.LockCore(ctx, []string{ms[0].DSN})
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Release()
	hung.stopKeeper() // the process hangs: nothing more is sent
	start := time.Now()
	const bound = 10 * time.Second
	for !free() {
		if time.Since(start) > bound {
			t.Fatalf("a hung holder's core lock still held after %v (want free within %v)", bound, bound)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("a hung holder's core lock free after %v", time.Since(start).Round(100*time.Millisecond))
}
