package clock_test

import (
	"net/http"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
)

// skew is how far the hosts' clocks are off in these tests: minutes, far
// beyond any window (api.Window is 10 s).
const skew = 5 * time.Minute

// TestExpiryAcrossSkewedServers: a packet sent on a server 5 min ahead
// (its expires_at 5 min late by the real clock) and opened on one 5 min
// behind (which takes it for alive 10 min longer than its sender did).
// The settler, on the sender's clock, closes it on time; the opens the
// server behind takes before that are credited exactly once, those after
// it are refused as expired (the closed row matches no open) although
// that server's clock says the packet lives, and the refund is exactly
// what was left, once.
func TestExpiryAcrossSkewedServers(t *testing.T) {
	const expiry = 6 * time.Second
	c := packettest.StartWith(t, clustertest.Options{Sets: 1, Expiry: expiry,
		ClockOffsets: map[string]time.Duration{"server-a1": skew, "server-a2": -skew, "settler-a": skew}})
	ahead, behind := onHost(t, c, "a", 0, skew), onHost(t, c, "a", 1, -skew)
	const total, count, early, late = 1000, 10, 4, 3
	sender := dbtest.FreshUser()
	c.TopUp(t, sender, total)
	sent := time.Now()
	id := ahead.send(t, sender, total, count)

	told := map[hongbao.UserID]int64{} // what each opener was told
	var opened int64
	for range early {
		u := dbtest.FreshUser()
		r := behind.open(t, u, id)
		if r.Status != http.StatusOK || r.Str("status") != hongbao.Opened || r.Amount() < 1 {
			t.Fatalf("open on the server behind, %v after the send: %v", time.Since(sent), r)
		}
		told[u] = r.Amount()
		opened += r.Amount()
	}
	if time.Since(sent) >= expiry {
		t.Fatalf("the early opens took %v, beyond the packet's life (%v): the machine is too slow for this test", time.Since(sent), expiry)
	}
	refundKey := hongbao.RefundKey(id)
	waitEntries(t, c, id, expiry+30*time.Second, refundKey)

	// Closed by the settler: the server behind still takes the packet for
	// alive (its expires_at is 10 min ahead of that server's clock), the
	// one ahead for long gone; both refuse it alike.
	for i := range late {
		h := []*host{behind, ahead}[i%2]
		if r := h.open(t, dbtest.FreshUser(), id); !r.IsProblem(http.StatusGone, "expired") {
			t.Errorf("open on %s after the settler closed the packet: %v; want 410 expired", h.addr, r)
		}
	}
	waitEmpty(t, c, "a", "hb_set.outbox", 30*time.Second)
	checkSettled(t, c, id, sender, total, told)
	if got := c.Balance(t, sender); got != total-opened {
		t.Errorf("sender's balance %d; want %d (topped up %d, %d opened)", got, total-opened, total, opened)
	}
	c.CheckInvariants(t)
}

// checkSettled fails unless the ledger holds exactly packet id's debit of
// total from sender, one credit per opener of what they were told, and one
// refund to sender of the rest.
func checkSettled(t *testing.T, c *packettest.Cluster, id hongbao.PacketID, sender hongbao.UserID, total int64, told map[hongbao.UserID]int64) {
	t.Helper()
	want := map[string]entry{hongbao.SendKey(id): {hongbao.KindSend, sender, -total}}
	left := total
	for u, amount := range told {
		want[hongbao.OpenKey(id, u)] = entry{hongbao.KindOpen, u, amount}
		left -= amount
	}
	if left > 0 {
		want[hongbao.RefundKey(id)] = entry{hongbao.KindRefund, sender, left}
	}
	got := entries(t, c, id)
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("packet %s: ledger entry %s is %+v (present %v); want %+v", id, k, g, ok, w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("packet %s: unexpected ledger entry %s %+v", id, k, g)
		}
	}
}
