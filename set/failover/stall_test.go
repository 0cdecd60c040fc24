package failover

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestStallSaysWhy (issue 23, finding 8): a write on a semi-sync primary
// whose replica is gone waits forever (the default for money); hbctl
// topology init, which make up runs at every start, hung there for
// minutes saying nothing after a failover. Stall says (on hbctl's stderr)
// what the write waits for and what to run, and gives up with that
// reason.
func TestStallSaysWhy(t *testing.T) {
	g := dbtest.StartReplicated(t, 0, 1)
	app := dbtest.Open(t, g.Primary.AppDSN(), 2)
	if _, err := app.Exec("CREATE DATABASE x"); err != nil {
		t.Fatal(err)
	}
	g.Replicas[0].Stop()
	var stderr bytes.Buffer
	const what = "topology init: SET a"
	s := Stall{SayAfter: 200 * time.Millisecond, GiveUp: 3 * time.Second,
		Say: func(why string) { fmt.Fprintf(&stderr, "hbctl: %s waits: %s\n", what, why) }} // as hbctl says it
	began := time.Now()
	err := s.Run(context.Background(), what, []string{g.Replicas[0].AppDSN(), g.Primary.AppDSN()}, "run hbctl set rejoin a",
		func(ctx context.Context) error {
			_, err := app.ExecContext(ctx, "CREATE TABLE x.t (id INT PRIMARY KEY)")
			return err
		})
	took := time.Since(began)
	if err == nil || !strings.Contains(err.Error(), "gave up after 3s") || !strings.Contains(err.Error(), "waiting for a replica's acknowledgement") ||
		!strings.Contains(err.Error(), "hbctl set rejoin a") {
		t.Errorf("Stall.Run: %v; want it to give up naming the missing replica and what to run", err)
	}
	if got := stderr.String(); strings.Count(got, "hbctl: topology init: SET a waits: ") != 1 || !strings.Contains(got, "1 commit(s) waiting") {
		t.Errorf("stderr: %q; want one line saying the write waits for an acknowledgement", got)
	}
	if took > 30*time.Second {
		t.Errorf("Stall.Run returned after %v; want about 3 s", took)
	}
}
