package clock_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
)

// sent is one send of the sweep test and its final answer.
type sent struct {
	sender hongbao.UserID
	r      clustertest.Response[api.PacketJSON]
}

// TestSweepOfASettlerAhead: a settler whose clock is 5 min ahead takes
// every pending send for 5 min old, past its sweep delay, and voids the
// debits of sends still under way. Each such send must answer 409
// send_cancelled with nothing debited; every 201 is debited exactly its
// total; no fen is created or lost (each sender's ledger is exactly that,
// and the audit's sums hold).
func TestSweepOfASettlerAhead(t *testing.T) {
	c := packettest.StartWith(t, clustertest.Options{Sets: 1, ClockOffsets: map[string]time.Duration{"settler-a": skew}})
	const total, workers, perRound, maxRounds = 1000, 16, 64, 20
	var all []sent
	voided := 0
	for round := 0; round < maxRounds && voided < 3; round++ {
		got := sendMany(t, c, total, workers, perRound)
		for _, s := range got {
			if s.r.Status == http.StatusConflict && s.r.Code == "send_cancelled" {
				voided++
			}
		}
		all = append(all, got...)
	}
	t.Logf("%d sends, %d voided under way by the settler ahead", len(all), voided)
	if voided == 0 {
		t.Fatalf("none of %d sends met the sweeper of a settler %v ahead: the case was not exercised", len(all), skew)
	}
	waitEmpty(t, c, "a", "hb_set.pending", 30*time.Second)
	for _, s := range all {
		checkSend(t, c, s, total)
	}
	c.CheckInvariants(t)
}

// sendMany sends n packets of total fen at once from workers goroutines,
// each from a fresh sender topped up with exactly total, under an
// Idempotency-Key (retried on 503 and lost answers).
func sendMany(t *testing.T, c *packettest.Cluster, total int64, workers, n int) []sent {
	t.Helper()
	out := make([]sent, n)
	for i := range out {
		out[i].sender = dbtest.FreshUser()
		c.TopUp(t, out[i].sender, total)
	}
	// A minute of retries: under make test's load (memcached and readiness
	// checks timing out) one attempt may take the router's 30 s, and a
	// send left without an answer fails the test without any money wrong.
	cl := c.Client.Retrying(time.Minute)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				out[i].r = cl.Send(out[i].sender, hongbao.SendRequest{Total: total, Count: 5, Type: hongbao.Random}, fmt.Sprintf("sweep-%d", out[i].sender))
			}
		})
	}
	wg.Wait()
	return out
}

// checkSend fails unless the sender's ledger is exactly its top-up and,
// for a 201, the debit of total, or, for a 409 send_cancelled, a void of
// its debit (0 fen): any other answer fails too.
func checkSend(t *testing.T, c *packettest.Cluster, s sent, total int64) {
	t.Helper()
	var want []entry
	switch {
	case s.r.Status == http.StatusCreated:
		want = []entry{{hongbao.KindTopUp, s.sender, total}, {hongbao.KindSend, s.sender, -total}}
	case s.r.Status == http.StatusConflict && s.r.Code == "send_cancelled":
		want = []entry{{hongbao.KindTopUp, s.sender, total}, {hongbao.KindVoid, s.sender, 0}}
	default:
		t.Errorf("sender %s: answered %d %s %s; want 201, or 409 send_cancelled", s.sender, s.r.Status, s.r.Code, s.r.Raw)
		return
	}
	got := userEntries(t, c, s.sender)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sender %s, answered %d %s: ledger %+v; want %+v", s.sender, s.r.Status, s.r.Code, got, want)
	}
}

// userEntries is user's ledger, in order.
func userEntries(t *testing.T, c *packettest.Cluster, user hongbao.UserID) []entry {
	t.Helper()
	var out []entry
	for _, e := range ledger(t, c, "user_id = ?", user) {
		out = append(out, e.entry)
	}
	return out
}
