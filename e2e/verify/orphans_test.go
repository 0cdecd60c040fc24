package verify_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// orphanPacket is a packet of TestVerifyOrphans as sent through the router.
type orphanPacket struct {
	id     hongbao.PacketID
	sender hongbao.UserID
	set    string
	table  string // its day table
	left   int64  // fen left after its opens
}

// TestVerifyOrphans: a funded packet past its expiry (plus hbsettler's
// sweep delay) that lost its expiry mark is never refunded. hbctl verify
// fails naming exactly it (SET, packet, bucket, table, fen left), not a
// packet that lost its mark but expired within the delay, nor one the
// settler refunded; --restore-marks writes the mark back, after which the
// settler refunds exactly the rest to its sender, once, and verify passes.
func TestVerifyOrphans(t *testing.T) {
	// Packets live 24 h; settle.sweep_after (the settlers' and verify's
	// delay) is 10 min: "recent" must stay within it until verify runs,
	// however slow a loaded machine makes the steps before.
	c := clustertest.Start(t, clustertest.Options{SweepAfter: 10 * time.Minute})
	orphan := sendOrphan(t, c, 3)
	recent := sendOrphan(t, c, 1)
	control := sendOrphan(t, c, 2)
	// An hour past expiry, its mark lost (the migration bug's state); 5 s
	// past expiry, its mark lost (within the configured 10 min); an hour
	// past expiry with its mark, which the settler closes.
	expired := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	expire(t, c, orphan, expired, false)
	expire(t, c, recent, time.Now().UTC().Add(-5*time.Second), false)
	expire(t, c, control, expired, true)
	waitRefund(t, c, control)

	out, err := c.Ctl("verify")
	if err == nil || strings.Contains(out, "OK: every invariant holds") {
		t.Fatalf("verify passed with an orphan: %v\n%s", err, out)
	}
	want := fmt.Sprintf("VIOLATION: SET %s: orphan packet %d (bucket %d, %s) of sender %d: funded, not closed, %d fen left in 2 of 5 shares, expired %s, "+
		"no expiry mark (hb_set.expiry): the settler never closes it nor refunds the rest",
		orphan.set, orphan.id, orphan.id.Bucket(), orphan.table, orphan.sender, orphan.left, expired.Format(time.RFC3339))
	if got := violations(out); len(got) != 1 || got[0] != want {
		t.Fatalf("verify's violations:\n%s\nwant exactly:\n%s\nout:\n%s", strings.Join(got, "\n"), want, out)
	}
	if strings.Contains(out, recent.id.String()) || !strings.Contains(out, "SET "+orphan.set+": 1 orphan packets") {
		t.Errorf("verify names the packet expired 5 s ago, or counts its orphans wrong:\n%s", out)
	}

	out, err = c.Ctl("verify", "--restore-marks")
	restored := fmt.Sprintf("SET %s: packet %d: restored its expiry mark: the settler settles it", orphan.set, orphan.id)
	if err == nil || !strings.Contains(out, restored) || len(violations(out)) != 1 {
		t.Fatalf("verify --restore-marks: %v, want one violation and %q:\n%s", err, restored, out)
	}
	waitRefund(t, c, orphan)
	// The recent one, its delay not waited for: restored and refunded too.
	out, err = c.Ctl("verify", "--restore-marks", "--sweep-after", "0s")
	if err == nil || !strings.Contains(out, fmt.Sprintf("packet %d: restored its expiry mark", recent.id)) {
		t.Fatalf("verify --restore-marks --sweep-after 0s: %v\n%s", err, out)
	}
	waitRefund(t, c, recent)

	// Settled: verify passes, a restore finds nothing, no second refund.
	c.CheckInvariants(t)
	if out := c.MustCtl(t, "verify"); !strings.Contains(out, "SET "+orphan.set+": 0 orphan packets") || !strings.Contains(out, "OK: every invariant holds") {
		t.Errorf("verify after the refunds:\n%s", out)
	}
	if out := c.MustCtl(t, "verify", "--restore-marks", "--sweep-after", "0s"); strings.Contains(out, "restored") {
		t.Errorf("a second restore wrote marks:\n%s", out)
	}
	time.Sleep(time.Second) // settler rounds: a second refund would land now
	for _, p := range []orphanPacket{orphan, recent, control} {
		checkRefund(t, c, p)
	}
}

// sendOrphan sends a packet of 500 fen in 5 shares from a sender topped up
// with 10,000 fen and opens opens of its shares.
func sendOrphan(t *testing.T, c *clustertest.Cluster, opens int) orphanPacket {
	t.Helper()
	p := orphanPacket{sender: ctltest.User()}
	c.TopUp(t, p.sender, 10_000)
	cl := c.Client.Retrying(10 * time.Second)
	r := cl.Send(p.sender, hongbao.SendRequest{Total: 500, Count: 5, Type: hongbao.Random}, "orphan-"+p.sender.String())
	if r.Status != http.StatusCreated {
		t.Fatalf("send: %v", r)
	}
	var err error
	if p.id, err = hongbao.ParsePacketID(r.Body.ID); err != nil {
		t.Fatal(err)
	}
	p.left = 500
	for range opens {
		o := cl.Open(ctltest.User(), p.id.String())
		if o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
			t.Fatalf("open %s: %v", p.id, o)
		}
		p.left -= o.Body.Amount
	}
	if p.set, err = c.SetOf(p.id); err != nil {
		t.Fatal(err)
	}
	p.table = p.id.Table(dbtest.Shanghai(t)).Packets()
	return p
}

// expire sets p's expiry to at, keeping its expiry mark in step or
// deleting it, in one transaction.
func expire(t *testing.T, c *clustertest.Cluster, p orphanPacket, at time.Time, keepMark bool) {
	t.Helper()
	tx, err := c.DB(p.set).BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: nothing to undo
	one := func(q string, args ...any) {
		t.Helper()
		res, err := tx.Exec(q, args...)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s: %d rows, want 1", q, n)
		}
	}
	one("UPDATE "+p.table+" SET expires_at = ? WHERE id = ?", at, p.id)
	if keepMark {
		one("UPDATE hb_set.expiry SET expires_at = ? WHERE packet_id = ?", at, p.id)
	} else {
		one("DELETE FROM hb_set.expiry WHERE packet_id = ?", p.id)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// waitRefund waits up to 30 s for p's refund in the ledger.
func waitRefund(t *testing.T, c *clustertest.Cluster, p orphanPacket) {
	t.Helper()
	key := hongbao.RefundKey(p.id)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if dbtest.Count(t, c.WalletDB(), "SELECT COUNT(*) FROM ledger WHERE entry_key = ?", key) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("packet %s: no refund after 30 s", p.id)
		}
	}
}

// checkRefund fails unless the ledger holds exactly one refund of p, of
// the fen left, to its sender, whose balance is then the top-up less what
// was opened.
func checkRefund(t *testing.T, c *clustertest.Cluster, p orphanPacket) {
	t.Helper()
	var n int
	var user hongbao.UserID
	var amount int64
	if err := c.WalletDB().QueryRow("SELECT COUNT(*), MAX(user_id), MAX(amount) FROM ledger WHERE entry_key = ?",
		hongbao.RefundKey(p.id)).Scan(&n, &user, &amount); err != nil {
		t.Fatal(err)
	}
	if n != 1 || user != p.sender || amount != p.left {
		t.Errorf("packet %s: %d refunds, to %d, %d fen; want 1, to %d, %d fen", p.id, n, user, amount, p.sender, p.left)
	}
	balance, err := c.Wallet().Balance(context.Background(), p.sender)
	if err != nil {
		t.Fatal(err)
	}
	if want := 10_000 - 500 + p.left; balance != want {
		t.Errorf("sender %d of %s: balance %d, want %d", p.sender, p.id, balance, want)
	}
}

// violations are the VIOLATION lines of verify's output.
func violations(out string) []string {
	return regexp.MustCompile(`(?m)^VIOLATION: .*$`).FindAllString(out, -1)
}

// TestVerifyNoOrphansWhileMoving: while packets of two buckets are sent,
// opened, expire (in 2 s) and are closed, and the buckets move between
// the SETs again and again (a move copies the marks with the packets),
// hbctl verify with no sweep delay at all passes every run (no orphan, and
// no bucket counted twice or not at all across a move's handover); once
// the load stops and the settlers catch up it passes.
func TestVerifyNoOrphansWhileMoving(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Expiry: 2 * time.Second, SweepAfter: 2 * time.Second, DevGrant: 1_000_000_000})
	buckets := ctltest.BucketsOf(t, c, c.Sets[0].Name)[:2]
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var sent, moves atomic.Int64
	for w := range 6 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				sender := ctltest.User()
				r := c.Client.Send(sender, hongbao.SendRequest{Total: 500, Count: 5, Type: hongbao.Random}, ctltest.KeyInto(sender, buckets[(w+i)%2]))
				if r.Status != http.StatusCreated {
					continue // busy or moving: the next one
				}
				sent.Add(1)
				for range i % 6 { // some sold out, most left to expire
					c.Client.Open(ctltest.User(), r.Body.ID)
				}
			}
		})
	}
	wg.Go(func() { // one move at a time: each bucket to the other SET, in turn
		for i := 0; ctx.Err() == nil; i++ {
			b, to := buckets[i%2], c.Sets[(i/2+1)%2].Name
			if out, err := c.Ctl("topology", "move", "--bucket", strconv.Itoa(int(b)), "--to", to); err != nil {
				t.Errorf("move bucket %d to %s: %v\n%s", b, to, err, out)
				return
			}
			moves.Add(1)
		}
	})
	runs, retried := 0, 0
	for start := time.Now(); runs < 6 || moves.Load() < 4; runs++ {
		if time.Since(start) > 2*time.Minute {
			t.Errorf("after 2 min: %d verify runs, %d moves", runs, moves.Load())
			break
		}
		out, err := c.Ctl("verify", "--sweep-after", "0s")
		// Every bucket counted once however the moves' handovers fall
		// between the SETs' snapshots: every run passes in full.
		if err != nil || !strings.Contains(out, "OK: every invariant holds") ||
			strings.Count(out, ": 0 orphan packets (expired before") != len(c.Sets) {
			t.Errorf("verify run %d (%d moves so far): %v\n%s", runs, moves.Load(), err, out)
		}
		if strings.Contains(out, "handed over while the snapshots opened") {
			retried++
		}
	}
	stop()
	wg.Wait()
	t.Logf("%d verify runs with no sweep delay passed (%d read a handover again), %d packets sent, %d moves",
		runs, retried, sent.Load(), moves.Load())
	// Quiet: everything expired is closed within a few settler rounds.
	var out string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var err error
		if out, err = c.Ctl("verify", "--sweep-after", "0s"); err == nil && strings.Contains(out, "OK: every invariant holds") {
			return
		}
	}
	t.Errorf("verify on the quiet cluster:\n%s", out)
}
