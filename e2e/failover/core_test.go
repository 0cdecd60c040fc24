package failover_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestCoreFailoverKilledPrimary: the core group (the meta and wallet
// databases: a primary and 2 replicas) loses its primary (kill -9) under a
// load of sends and opens; hbctl core failover promotes the most advanced
// replica, and the router, servers and settlers follow it without a
// restart: sends (wallet debits) are acknowledged again, no client sees an
// error (503s retried), no acknowledged send or open is lost, every
// wallet balance is exact and hbctl verify holds.
//
// The settlers sweep pending sends after 30 s, their production default: a
// send waiting for its debit while the wallet's group fails over (5.5 s
// under a loaded make test) must not be voided under the client (409
// send_cancelled, as the tests' 5 s did once).
func TestCoreFailoverKilledPrimary(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: ctltest.DevGrant, Core: 2, SweepAfter: ctltest.SweepAfter})
	l, killed, took := failoverUnderLoad(t, c, c.Core.Primary, []string{"core", "failover"},
		"does not answer", "promoted 127.0.0.1:", "1 replica(s) follow it", "failover epoch")
	primary := ctltest.WritableMember(t, c.Core)
	if primary == nil || primary == c.Core.Primary {
		t.Fatalf("no replica of the core group was promoted")
	}
	ctltest.CheckFollowers(t, c.Core, primary, c.Core.Primary)
	checkMovesLogged(t, c, primary)
	gap := l.Check(t, c, "a", killed)
	checkSendsAfter(t, l, killed.Add(took))
	checkBalances(t, c, l)
	t.Logf("no open acknowledged on SET a for %v after the core primary was killed (hbctl core failover took %v)",
		gap.Round(time.Millisecond), took.Round(time.Millisecond))
	t.Logf("hbctl core status:\n%s", c.MustCtl(t, "core", "status"))
}

// checkMovesLogged: every process logged that its pools on the core group
// (the router's on the meta database; servers' and settlers' on the meta
// and wallet databases) follow the promoted member.
func checkMovesLogged(t *testing.T, c *clustertest.Cluster, primary *dbtest.MariaDB) {
	t.Helper()
	member := fmt.Sprintf(`"member":"127.0.0.1:%d"`, primary.Port)
	for _, p := range c.Processes() {
		dbs := []string{"meta", "wallet"}
		if p.Kind == clustertest.Router {
			dbs = dbs[:1]
		}
		b, err := os.ReadFile(p.Log)
		if err != nil {
			t.Fatal(err)
		}
		for _, db := range dbs {
			if !logged(string(b), "core group: following a new primary", `"db":"`+db+`"`, member) {
				t.Errorf("%s %s did not log its %s pool's move to 127.0.0.1:%d", p.Kind, p.Name, db, primary.Port)
			}
		}
	}
}

// logged reports whether one line of log holds every part.
func logged(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}

// checkSendsAfter fails the test unless sends were acknowledged after the
// failover: the servers debit the wallet on its new primary.
func checkSendsAfter(t *testing.T, l *ctltest.TimedLoad, after time.Time) {
	t.Helper()
	n := 0
	for _, s := range l.Sends {
		if s.At.After(after) {
			n++
		}
	}
	if n < 10 {
		t.Errorf("only %d sends acknowledged after the failover (of %d)", n, len(l.Sends))
	}
	t.Logf("%d of %d acknowledged sends after the failover", n, len(l.Sends))
}

// checkBalances fails the test unless every balance is what the load's
// acknowledged answers make it: each opener (a fresh user) holds its
// share, each sender (a fresh user) its grant less its packet's total
// (every packet was opened whole, so nothing was refunded). Run it once
// the outbox is delivered.
func checkBalances(t *testing.T, c *clustertest.Cluster, l *ctltest.TimedLoad) {
	t.Helper()
	ctx := context.Background()
	want := map[hongbao.UserID]int64{}
	for _, s := range l.Sends {
		want[s.From] += ctltest.DevGrant - 500
	}
	for _, a := range l.Acks {
		want[a.User] += a.Amount
	}
	bad := 0
	for u, w := range want {
		got, err := c.Wallet().Balance(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		if got != w {
			bad++
			if bad <= 5 {
				t.Errorf("user %s holds %d fen, the acknowledged answers make %d", u, got, w)
			}
		}
	}
	t.Logf("%d balances checked, %d wrong", len(want), bad)
}

// TestLosingSetAKeepsSetBSending (issue 14, problem 2): SET a's MariaDB
// used to hold the meta and wallet databases, so losing it stopped every
// send of the cluster and every wallet read. With the core group apart,
// SET b sends, opens and reads wallets while SET a's MariaDB is down (on
// the old layout every send fails: its debit cannot reach the wallet), and
// verify holds once it is back.
func TestLosingSetAKeepsSetBSending(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: ctltest.DevGrant, Core: 1})
	onB := ctltest.BucketsOf(t, c, "b")
	if len(onB) < 3 {
		t.Fatalf("SET b owns %d buckets", len(onB))
	}
	a := c.Set("a").MariaDB
	a.Stop()
	cl := c.Client.Retrying(10 * time.Second)
	for _, b := range onB[:3] {
		id, shares := ctltest.SendInto(t, c, b, 4, 4)
		for u, amount := range shares {
			if w := cl.Wallet(u); w.Status != http.StatusOK {
				t.Errorf("wallet of %s (opened %d fen of %s) with SET a down: %v", u, amount, id, w)
			}
		}
	}
	if err := a.Restart(); err != nil {
		t.Fatal(err)
	}
	ctltest.WaitOutbox(t, c)
	c.CheckInvariants(t)
}

// TestCoreRejoin: the core group with one replica, its primary killed on
// a quiet cluster. hbctl core failover --accept-single-copy lets the lone
// promoted replica write at once: sends go on, the processes follow it.
// The old primary restarted comes back writable with its old epoch (as
// one never fenced): the processes stay on the new primary, a send's
// debit is there and not on the old one. hbctl core rejoin makes it a
// replica of the new primary, and hbctl core status says so.
func TestCoreRejoin(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: ctltest.DevGrant, Sets: 1, ServersPerSet: 1, Core: 1})
	p, r := c.Core.Primary, c.Core.Replicas[0]
	bs := ctltest.BucketsOf(t, c, "a")
	ctltest.SendInto(t, c, bs[0], 2, 2)
	ctltest.WaitOutbox(t, c)
	p.Stop()
	out := c.MustCtl(t, "core", "failover", "--accept-single-copy")
	t.Logf("hbctl core failover --accept-single-copy:\n%s", out)
	if !strings.Contains(out, "--accept-single-copy: it replicates asynchronously") {
		t.Errorf("failover of a core group with one replica does not warn that it writes on one machine:\n%s", out)
	}
	if ctltest.WritableMember(t, c.Core) != r {
		t.Fatal("the core group's replica is not writable after the failover")
	}
	ctltest.SendInto(t, c, bs[1], 2, 2)

	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	id, _ := ctltest.SendInto(t, c, bs[2], 2, 2)
	for _, m := range []struct {
		db   *dbtest.MariaDB
		want int
	}{{p, 0}, {r, 1}} {
		db, err := sqldb.Open(m.db.DSN, 1)
		if err != nil {
			t.Fatal(err)
		}
		n := dbtest.Count(t, db, "SELECT COUNT(*) FROM hb_wallet.ledger WHERE entry_key = ?", hongbao.SendKey(id))
		db.Close()
		if n != m.want {
			t.Errorf("the debit of %s is %d times on port %d, want %d (old primary %d, new %d)", id, n, m.db.Port, m.want, p.Port, r.Port)
		}
	}

	out = c.MustCtl(t, "core", "rejoin")
	t.Logf("hbctl core rejoin:\n%s", out)
	ctltest.CheckFollowers(t, c.Core, r, nil)
	st := c.MustCtl(t, "core", "status")
	t.Logf("hbctl core status:\n%s", st)
	for _, want := range []string{fmt.Sprintf("primary 127.0.0.1:%d", r.Port), fmt.Sprintf("127.0.0.1:%d: read-only", p.Port),
		fmt.Sprintf("replicates from 127.0.0.1:%d (IO Yes, SQL Yes)", r.Port)} {
		if !strings.Contains(st, want) {
			t.Errorf("hbctl core status lacks %q", want)
		}
	}
	ctltest.WaitOutbox(t, c)
	c.CheckInvariants(t)
}
