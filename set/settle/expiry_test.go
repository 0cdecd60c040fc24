package settle_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
)

// TestExpiryRacesOpens: users keep arriving to open a big packet across its
// expiry. Every fen ends up either in exactly one share or in the refund,
// and no open made after the expiry (let alone after the refund was
// written) takes a share.
func TestExpiryRacesOpens(t *testing.T) {
	const expiry = 2 * time.Second
	c := clustertest.Start(t, clustertest.Options{Expiry: expiry})
	cl := c.Client.Retrying(10 * time.Second)
	const sender hongbao.UserID = 500
	c.TopUp(t, sender, 20000)
	s := cl.Send(sender, hongbao.SendRequest{Total: 20000, Count: 100, Type: hongbao.Random}, "big")
	if s.Status != http.StatusCreated {
		t.Fatalf("send: %v", s)
	}
	id, expires := s.Body.ID, expiresAt(t, s.Body)

	// 100 users, one arriving every 30ms from now on: they straddle the
	// expiry. Each opens twice, 50ms apart: the second answer repeats the
	// share of the first, or is expired like it.
	type result struct {
		user    hongbao.UserID
		answers []clustertest.Response[api.OpenJSON]
	}
	results := make([]result, 100)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range results {
		results[i].user = hongbao.UserID(9001 + i)
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(time.Duration(i) * 30 * time.Millisecond)))
			for range 2 {
				results[i].answers = append(results[i].answers, cl.Open(results[i].user, id))
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()

	owner, err := c.SetOf(mustID(t, id))
	if err != nil {
		t.Fatal(err)
	}
	waitSettled(t, c, false, 20*time.Second)
	refundRows := ledger(t, c, "entry_key = ?", "refund:"+id)
	if len(refundRows) != 1 {
		t.Fatalf("refund rows of %s: %+v, want one", id, refundRows)
	}
	refund := refundRows[0]

	var shares int64
	opened, expired := 0, 0
	for _, r := range results {
		var got int64 // this user's share, from the first opened answer
		for _, a := range r.answers {
			if got == 0 && a.Sent.After(refund.at) && (a.Status != http.StatusGone || a.Code != "expired") {
				t.Errorf("user %s: open sent at %s after the refund was written (%s): %v, want 410 expired",
					r.user, a.Sent.Format(api.TimeFormat), refund.at.Format(api.TimeFormat), a)
			}
			switch {
			case a.Status == http.StatusOK && a.Body.Status == hongbao.Opened:
				if got != 0 {
					t.Errorf("user %s opened twice: %v", r.user, r.answers)
				}
				got = a.Body.Amount
				opened++
				shares += a.Body.Amount
				if !a.Sent.Before(expires) {
					t.Errorf("user %s: open sent at %s, after the expiry %s, took a share", r.user, a.Sent.Format(api.TimeFormat), expires.Format(api.TimeFormat))
				}
			case a.Status == http.StatusOK && a.Body.Status == hongbao.AlreadyOpened:
				if a.Body.Amount != got {
					t.Errorf("user %s: already_opened %d, share %d", r.user, a.Body.Amount, got)
				}
			case a.Status == http.StatusGone && a.Code == "expired":
				expired++
				if got != 0 {
					t.Errorf("user %s holds a share of %d, but an open again was answered %v; want already_opened", r.user, got, a)
				}
			default:
				t.Errorf("user %s: open answered %v", r.user, a)
			}
		}
	}
	t.Logf("packet %s on SET %s: %d shares (%d fen) before the expiry, %d expired answers, refund %d fen",
		id, owner, opened, shares, expired, refund.amount)
	if opened == 0 || expired == 0 || refund.amount == 0 {
		t.Errorf("the opens did not straddle the expiry: %d opened, %d expired, refund %d", opened, expired, refund.amount)
	}
	if shares+refund.amount != 20000 {
		t.Errorf("shares %d + refund %d != total 20000", shares, refund.amount)
	}
	if refund.user != sender {
		t.Errorf("refund to %s, want the sender %s", refund.user, sender)
	}
	credits := ledger(t, c, "packet_id = ? AND kind = 'open'", mustID(t, id))
	var credited int64
	for _, e := range credits {
		credited += e.amount
	}
	if len(credits) != opened || credited != shares {
		t.Errorf("credits in the ledger: %d rows, %d fen; want %d rows, %d fen", len(credits), credited, opened, shares)
	}
	d := cl.Detail(sender, id)
	if d.Status != http.StatusOK || d.Body.Status != "expired" || d.Body.RemainingAmount != refund.amount || len(d.Body.Records) != opened {
		t.Errorf("detail after the expiry: %v; want expired with %d fen left and %d records", d, refund.amount, opened)
	}
	if got := balance(t, c, sender); got != refund.amount {
		t.Errorf("sender's balance %d, want the refund %d", got, refund.amount)
	}
	c.CheckInvariants(t)
}
