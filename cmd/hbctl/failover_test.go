package main_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/router/clustertest"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/dbtest"
	"github.com/hongbao-dev/hongbao/store/replication"
)

// ack is an open the router acknowledged, and when.
type ack struct {
	opened
	at time.Time
}

// timedLoad sends packets of 5 shares and opens them through the router,
// retrying 503s and lost answers for up to 20 s as an app does, keeping
// every acknowledged open with its time and every final error.
type timedLoad struct {
	mu     sync.Mutex
	acks   []ack
	sent   []hongbao.PacketID
	errors []string
}

func (l *timedLoad) run(c *clustertest.Cluster, workers int, stop <-chan struct{}) *sync.WaitGroup {
	cl := c.Client.Retrying(20 * time.Second)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := cl.Send(user(), hongbao.SendRequest{Total: 500, Count: 5, Type: hongbao.Random}, fmt.Sprintf("fw%d-%d", w, i))
				id, err := hongbao.ParsePacketID(r.Body.ID)
				if r.Status != http.StatusCreated || err != nil {
					l.fail("send: " + r.String())
					continue
				}
				l.mu.Lock()
				l.sent = append(l.sent, id)
				l.mu.Unlock()
				for range 5 {
					u := user()
					o := cl.Open(u, id.String())
					if o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
						l.fail(fmt.Sprintf("open %s: %v", id, o))
						continue
					}
					l.mu.Lock()
					l.acks = append(l.acks, ack{opened{id, u, o.Body.Amount}, o.Answered})
					l.mu.Unlock()
				}
			}
		})
	}
	return &wg
}

func (l *timedLoad) fail(s string) {
	l.mu.Lock()
	l.errors = append(l.errors, s)
	l.mu.Unlock()
}

// check fails the test unless no client saw an error, every acknowledged
// open is in the MySQL of its SET with its amount, every packet keeps its
// invariants and hbctl verify holds; it returns the longest time SET set
// acknowledged no open after since.
func (l *timedLoad) check(t *testing.T, c *clustertest.Cluster, set string, since time.Time) time.Duration {
	t.Helper()
	for i, e := range l.errors {
		if i == 5 {
			t.Errorf("... %d client errors in all", len(l.errors))
			break
		}
		t.Errorf("a client saw: %s", e)
	}
	waitOutbox(t, c)
	lost, onSet := 0, 0
	var times []time.Time
	for _, a := range l.acks {
		owner := ownerOf(t, c, a.id.Bucket())
		if got := sharesOn(t, c, owner, a.id)[a.user]; got != a.amount {
			lost++
			if lost <= 5 {
				t.Errorf("user %s was answered %d fen of %s; SET %s holds %d", a.user, a.amount, a.id, owner, got)
			}
		}
		if owner == set {
			onSet++
			if a.at.After(since) {
				times = append(times, a.at)
			}
		}
	}
	for _, id := range l.sent {
		dbtest.CheckPacket(t, c.DB(ownerOf(t, c, id.Bucket())), id) // shares + remaining = total, no user twice
	}
	c.CheckInvariants(t)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	gap := time.Duration(0)
	prev := since
	for _, at := range times {
		gap = max(gap, at.Sub(prev))
		prev = at
	}
	if onSet < 50 || len(times) < 10 {
		t.Errorf("only %d opens acknowledged on SET %s, %d after the fault", onSet, set, len(times))
	}
	t.Logf("%d acknowledged opens checked (%d on SET %s), %d lost; %d packets checked", len(l.acks), onSet, set, lost, len(l.sent))
	return gap
}

// TestFailoverKilledPrimary: SET b's primary MariaDB is killed (-9) under
// load; hbctl set failover promotes its replica. No client sees an error
// (503s are retried), no acknowledged open is lost, no share is doubled,
// verify holds; the time SET b acknowledged no open is logged.
func TestFailoverKilledPrimary(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000_000, Replicated: []string{"b"}})
	b := c.Set("b")
	l := &timedLoad{}
	stop := make(chan struct{})
	wg := l.run(c, 16, stop)
	time.Sleep(3 * time.Second)
	b.Pair.Primary.Stop()
	killed := time.Now()
	out := c.MustCtl(t, "set", "failover", "b")
	took := time.Since(killed)
	t.Logf("hbctl set failover b (%v):\n%s", took.Round(time.Millisecond), out)
	if !strings.Contains(out, "does not answer") || !strings.Contains(out, "promoted 127.0.0.1:") {
		t.Errorf("failover's report lacks the unreachable primary or the promotion:\n%s", out)
	}
	time.Sleep(4 * time.Second)
	close(stop)
	wg.Wait()
	if m := c.Follow(t, "b"); m != b.Pair.Replica {
		t.Fatalf("SET b's MySQL after the failover is not its replica")
	}
	gap := l.check(t, c, "b", killed)
	t.Logf("SET b without acknowledged opens for %v after its primary was killed (hbctl set failover took %v)",
		gap.Round(time.Millisecond), took.Round(time.Millisecond))
}

// details reads every share visible in a SET database's detail tables.
func details(t *testing.T, db *sql.DB) map[[2]int64]int64 {
	t.Helper()
	rows, err := db.Query(`SELECT CONCAT(table_schema, '.', table_name) FROM information_schema.tables
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
		rows, err := db.Query("SELECT packet_id, user_id, amount FROM " + tb)
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

// TestFailoverPausedPrimary: SET b's primary is paused (SIGSTOP) under
// load and failed over without being reachable; then it goes on
// (SIGCONT). It commits nothing after the promotion: every share it shows
// is on the new primary with the same amount, and what it has in its
// binary log beyond the new primary is exactly what rejoin names as
// errant (or, when there is nothing, rejoin makes it a replica that
// follows the new primary).
func TestFailoverPausedPrimary(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000_000, Replicated: []string{"b"}})
	b := c.Set("b")
	l := &timedLoad{}
	stop := make(chan struct{})
	wg := l.run(c, 16, stop)
	time.Sleep(3 * time.Second)
	if err := b.Pair.Primary.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	out := c.MustCtl(t, "set", "failover", "b")
	t.Logf("hbctl set failover b with its primary paused (%v):\n%s", time.Since(paused).Round(time.Millisecond), out)
	time.Sleep(4 * time.Second)
	close(stop)
	wg.Wait()
	c.Follow(t, "b")
	gap := l.check(t, c, "b", paused)
	t.Logf("SET b without acknowledged opens for %v after its primary was paused", gap.Round(time.Millisecond))

	oldDB, err := schema.Open(b.Pair.Primary.DSN, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer oldDB.Close()
	newDB := c.DB("b")
	if err := b.Pair.Primary.Resume(); err != nil {
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
	bs := bucketsOf(t, c, "b")
	id, shares := sendInto(t, c, bs[0], 3, 1)
	b.Pair.Replica.Stop()
	u := user()
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
	if err := b.Pair.Replica.Restart(); err != nil {
		t.Fatal(err)
	}
	o = c.Client.Retrying(30*time.Second).Open(u, id.String())
	if o.Status != http.StatusOK || (o.Body.Status != hongbao.Opened && o.Body.Status != hongbao.AlreadyOpened) {
		t.Fatalf("open after the replica came back: %v", o)
	}
	shares[u] = o.Body.Amount
	p := dbtest.CheckPacket(t, primary, id)
	sameShares(t, "the packet on the primary", p.Shares, shares)
	if len(p.Shares) != 2 {
		t.Errorf("packet %s has %d shares; want 2 (one before, one while the replica was down)", id, len(p.Shares))
	}
	replica, err := schema.Open(b.Pair.Replica.DSN, 2)
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
	sameShares(t, "the packet on the replica", dbtest.ReadPacket(t, replica, id).Shares, shares)
	waitOutbox(t, c)
	c.CheckInvariants(t)
}
