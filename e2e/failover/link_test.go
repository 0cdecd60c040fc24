package failover_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestFailoverBrokenReplicaLink is the check of issue #23's first finding,
// from outside: under load, SET b's only replica stops receiving (STOP
// SLAVE IO_THREAD: the primary's commits now wait for an acknowledgement
// nobody sends), and 6 s later the operator fails SET b over to it with
// --accept-single-copy. The commits that waited were never acknowledged:
// whatever the fence does to them, no process may read or pay them. So
// every acknowledged open is on the promoted primary with its amount, the
// wallet holds exactly the credits of the shares there (hbctl verify), and
// no opener is credited for a share the promoted primary lacks.
func TestFailoverBrokenReplicaLink(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000_000, Replicated: []string{"b"}, SweepAfter: ctltest.SweepAfter})
	b := c.Set("b")
	old, replica := b.Group.Primary, b.Group.Replicas[0]
	l := &ctltest.TimedLoad{}
	stop := make(chan struct{})
	wg := l.Run(c, 16, stop)
	waitAcked(l, 40, 3*time.Second, 30*time.Second)
	rdb, err := sqldb.Open(replica.DSN, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if _, err := rdb.Exec("STOP SLAVE IO_THREAD"); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	// The clients' next commits wait for an acknowledgement that does not
	// come: polled, since on a starved machine the next may be a while.
	time.Sleep(6 * time.Second)
	for semiSync(t, c.DB("b"), "Rpl_semi_sync_master_wait_sessions") < 1 {
		if time.Since(cut) > 40*time.Second {
			t.Fatalf("no commit waits for an acknowledgement on SET b's primary %v after its replica stopped receiving", time.Since(cut).Round(time.Second))
		}
		time.Sleep(200 * time.Millisecond)
	}
	waited := time.Now()
	out := c.MustCtl(t, "set", "failover", "b", "--accept-single-copy")
	took := time.Since(waited)
	t.Logf("hbctl set failover b --accept-single-copy (%v):\n%s", took.Round(time.Millisecond), out)
	if c.Follow(t, "b") != replica {
		t.Fatalf("SET b's MySQL after the failover is not its replica")
	}
	waitAcked(l, l.Acked()+80, 4*time.Second, 30*time.Second)
	close(stop)
	wg.Wait()
	l.Check(t, c, "b", cut)
	// The old primary holds what waited; none of it may be readable by
	// the application there (it is not readable anywhere else).
	app, err := sqldb.Open(old.AppDSN(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := app.PingContext(ctx); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Errorf("the application connects to the old primary after the failover (%v); want its account locked", err)
	}
}
