package verify_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
)

// hbctl verify tells the truth on a live system (issue 14, problem 5):
// while clients send and open and the settlers deliver credits and
// refunds, every run passes and finds no orphan, even with no sweep delay
// (packets expiring and being closed meanwhile); with a ledger row or a
// share tampered with, it fails and names the violation.
func TestVerifyLive(t *testing.T) {
	// Packets expire in 3 s: refunds flow through the outbox as well.
	c := clustertest.Start(t, clustertest.Options{Expiry: 3 * time.Second, SweepAfter: 2 * time.Second, DevGrant: 1_000_000_000})
	ctx, stop := context.WithCancel(context.Background())
	var sent, opened atomic.Int64
	var some struct {
		sync.Mutex
		packet string
	}
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				sender := ctltest.User()
				r := c.Client.Send(sender, hongbao.SendRequest{Total: 700, Count: 7, Type: hongbao.Random}, fmt.Sprintf("live-%d-%d-%d", sender, w, i))
				if r.Status != 201 {
					continue
				}
				sent.Add(1)
				for range 4 + i%4 { // some sold out, most left to expire
					if o := c.Client.Open(ctltest.User(), r.Body.ID); o.Status == 200 {
						opened.Add(1)
						some.Lock()
						some.packet = r.Body.ID
						some.Unlock()
					}
				}
			}
		})
	}
	// Wait for traffic, then verify again and again under it.
	for deadline := time.Now().Add(20 * time.Second); opened.Load() < 50 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	var inFlight int
	for run := range 8 {
		// Every other run with no sweep delay at all: in a SET's snapshot
		// a packet and its marks change together, so even a packet that
		// expired a moment ago and is being closed is no orphan.
		args := []string{"verify"}
		if run%2 == 1 {
			args = append(args, "--sweep-after", "0s")
		}
		out, err := c.Ctl(args...)
		if err != nil || !strings.Contains(out, "OK: every invariant holds") ||
			strings.Count(out, ": 0 orphan packets (expired before") != len(c.Sets) {
			stop()
			wg.Wait()
			t.Fatalf("%v run %d under load (%d sent, %d opened so far): %v\n%s", args, run, sent.Load(), opened.Load(), err, out)
		}
		if !strings.Contains(out, "in flight: 0 outbox entries already in the ledger (0 fen, counted once), 0 ledger") {
			inFlight++
		}
		time.Sleep(300 * time.Millisecond)
	}
	stop()
	wg.Wait()
	t.Logf("8 verify runs passed under load (%d packets sent, %d opens), %d of them with money in flight", sent.Load(), opened.Load(), inFlight)
	if sent.Load() < 20 || opened.Load() < 50 {
		t.Fatalf("too little load: %d sent, %d opened", sent.Load(), opened.Load())
	}

	// Money really wrong: one credit's amount in the ledger, then one share.
	wdb := c.WalletDB()
	var seq int64
	if err := wdb.QueryRow("SELECT seq FROM ledger WHERE kind = 'open' ORDER BY seq LIMIT 1").Scan(&seq); err != nil {
		t.Fatal(err)
	}
	tamper(t, c, wdb.Exec, "UPDATE ledger SET amount = amount + 1 WHERE seq = ?", "UPDATE ledger SET amount = amount - 1 WHERE seq = ?", seq,
		"balance", "money not conserved")

	some.Lock()
	id, err := hongbao.ParsePacketID(some.packet)
	some.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	set, err := c.SetOf(id)
	if err != nil {
		t.Fatal(err)
	}
	var table string
	b := id.Bucket()
	if err := c.DB(set).QueryRow(`SELECT CONCAT(table_schema, '.', table_name) FROM information_schema.tables
		WHERE table_schema = ? AND table_name LIKE ? AND table_name LIKE '%\_detail'`, b.DB(), fmt.Sprintf("t\\_%d\\_%%", int(b)%10)).Scan(&table); err != nil {
		t.Fatal(err)
	}
	tamper(t, c, c.DB(set).Exec, "UPDATE "+table+" SET amount = amount + 1 WHERE packet_id = ? LIMIT 1",
		"UPDATE "+table+" SET amount = amount - 1 WHERE packet_id = ? LIMIT 1", int64(id), "packet "+id.String())
}

// tamper applies do to arg, checks that verify fails naming each of want,
// applies undo and checks that verify passes again.
func tamper[R any](t *testing.T, c *clustertest.Cluster, exec func(string, ...any) (R, error), do, undo string, arg any, want ...string) {
	t.Helper()
	if _, err := exec(do, arg); err != nil {
		t.Fatal(err)
	}
	out, err := c.Ctl("verify")
	if err == nil {
		t.Errorf("verify passed after %s:\n%s", do, out)
	}
	for _, w := range want {
		if !strings.Contains(out, "VIOLATION") || !strings.Contains(out, w) {
			t.Errorf("verify after %s does not say %q:\n%s", do, w, out)
		}
	}
	if _, err := exec(undo, arg); err != nil {
		t.Fatal(err)
	}
	c.CheckInvariants(t)
}
