package settle_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
)

// TestIdempotentSend sends the same request under one Idempotency-Key
// twice in a row, and under five more keys eight times at once each:
// every attempt is answered 201 with its key's packet, each key yields one
// packet and one debit (ledger row send:<id>), and the balance drops once
// per key. The same key for another request is refused with 422.
func TestIdempotentSend(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	cl := c.Client.Retrying(10 * time.Second)
	const sender hongbao.UserID = 77
	c.TopUp(t, sender, 20000)

	req := hongbao.SendRequest{Total: 1000, Count: 5, Type: hongbao.Random, Greeting: "again"}
	first := cl.Send(sender, req, "same-key")
	second := cl.Send(sender, req, "same-key")
	if first.Status != http.StatusCreated || second.Status != http.StatusCreated || first.Body.ID != second.Body.ID {
		t.Fatalf("same key twice: %v then %v; want 201 twice with one packet", first, second)
	}

	// Five keys, each sent eight times at once.
	req2 := hongbao.SendRequest{Total: 2000, Count: 4, Type: hongbao.Fixed}
	ids := []string{first.Body.ID}
	for k := range 5 {
		key := fmt.Sprintf("concurrent-key-%d", k)
		answers := make([]clustertest.Response[api.PacketJSON], 8)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() { answers[i] = cl.Send(sender, req2, key) })
		}
		wg.Wait()
		var want string // the packet of the first 201
		for _, r := range answers {
			if r.Status == http.StatusCreated && want == "" {
				want = r.Body.ID
			}
		}
		for i, r := range answers {
			if r.Status != http.StatusCreated || r.Body.ID != want {
				t.Errorf("%s, concurrent send %d: %v; want 201 with packet %s", key, i, r, want)
			}
		}
		if want != "" {
			ids = append(ids, want)
		}
	}

	// The same key for another request is refused and moves nothing.
	if r := cl.Send(sender, hongbao.SendRequest{Total: 999, Count: 5, Type: hongbao.Random, Greeting: "again"}, "same-key"); r.Status != http.StatusUnprocessableEntity || r.Code != "idempotency_key_reused" {
		t.Errorf("same key, other request: %v; want 422 idempotency_key_reused", r)
	}

	// One debit and one packet per key (that got any 201 at all).
	if got, want := balance(t, c, sender), 20000-1000-2000*int64(len(ids)-1); got != want {
		t.Errorf("balance %d, want %d", got, want)
	}
	for _, id := range ids {
		if es := ledger(t, c, "entry_key = ?", "send:"+id); len(es) != 1 {
			t.Errorf("ledger rows with key send:%s: %+v, want exactly one", id, es)
		}
	}
	if es := ledger(t, c, "user_id = ? AND kind = 'send'", sender); len(es) != len(ids) {
		t.Errorf("debits of the sender: %+v, want %d", es, len(ids))
	}
	ps := packetsOf(t, c, sender)
	if len(ps) != len(ids) {
		t.Errorf("packets of the sender in MySQL: %+v, want %d", ps, len(ids))
	}
	for _, p := range ps {
		if p.funding != hongbao.Funded {
			t.Errorf("packet %s: funding %d, want funded", p.id, p.funding)
		}
	}
	c.CheckInvariants(t)
}

// TestInsufficientFunds: a send the balance does not cover is answered
// 402 insufficient_funds, with or without an Idempotency-Key; it moves no
// money, leaves no funded packet in any SET and nothing anyone can open;
// concurrent sends never overdraw.
func TestInsufficientFunds(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{ServersPerSet: 1})
	cl := c.Client.Retrying(10 * time.Second)
	const poor, never, exact, racer, opener hongbao.UserID = 31, 32, 33, 34, 35
	c.TopUp(t, poor, 500)
	c.TopUp(t, exact, 1000)
	c.TopUp(t, racer, 1000)

	req := hongbao.SendRequest{Total: 1000, Count: 2, Type: hongbao.Random}
	for _, tc := range []struct {
		name string
		user hongbao.UserID
		key  string
	}{{"without key", poor, ""}, {"with key", poor, "poor-1"}, {"with key, retried", poor, "poor-1"}, {"never credited", never, "never-1"}} {
		if r := cl.Send(tc.user, req, tc.key); r.Status != http.StatusPaymentRequired || r.Code != "insufficient_funds" {
			t.Errorf("%s: send of 1000 fen: %v; want 402 insufficient_funds", tc.name, r)
		}
	}
	if got := balance(t, c, poor); got != 500 {
		t.Errorf("balance after refused sends: %d, want 500", got)
	}
	if got := balance(t, c, never); got != 0 {
		t.Errorf("balance of a user never credited: %d, want 0", got)
	}
	for _, u := range []hongbao.UserID{poor, never} {
		if es := ledger(t, c, "user_id = ? AND kind <> 'topup'", u); len(es) != 0 {
			t.Errorf("user %s: ledger entries after refused sends: %+v", u, es)
		}
		for _, p := range packetsOf(t, c, u) {
			if p.funding == hongbao.Funded {
				t.Errorf("user %s: funded packet %s in SET %s after a refused send", u, p.id, p.set)
				continue
			}
			// A refused send may leave a cancelled row: nobody can open it.
			if r := cl.Open(opener, p.id.String()); r.Status != http.StatusNotFound {
				t.Errorf("open of unfunded packet %s (funding %d): %v; want 404", p.id, p.funding, r)
			}
			if r := cl.Grab(opener, p.id.String()); r.Status != http.StatusNotFound && (r.Status != http.StatusOK || r.Body.CanOpen) {
				t.Errorf("grab of unfunded packet %s (funding %d): %v; want 404 or can_open false", p.id, p.funding, r)
			}
			if r := cl.Detail(opener, p.id.String()); r.Status != http.StatusNotFound && (r.Status != http.StatusOK || r.Body.Status == string(hongbao.Active)) {
				t.Errorf("detail of unfunded packet %s (funding %d): %v; want 404, or anything but active", p.id, p.funding, r)
			}
		}
	}

	// Exactly the balance is enough; then nothing is left.
	if r := cl.Send(exact, req, ""); r.Status != http.StatusCreated {
		t.Fatalf("send of the whole balance: %v", r)
	}
	if r := cl.Send(exact, hongbao.SendRequest{Total: 1, Count: 1, Type: hongbao.Random}, "exact-2"); r.Status != http.StatusPaymentRequired || r.Code != "insufficient_funds" {
		t.Errorf("send from an empty wallet: %v; want 402 insufficient_funds", r)
	}
	if got := balance(t, c, exact); got != 0 {
		t.Errorf("balance after spending it all: %d, want 0", got)
	}

	// Five concurrent sends of 300 against 1000: three are paid, never more.
	codes := make([]int, 5)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			r := cl.Send(racer, hongbao.SendRequest{Total: 300, Count: 3, Type: hongbao.Fixed}, fmt.Sprintf("race-%d", i))
			codes[i] = r.Status
			if r.Status != http.StatusCreated && (r.Status != http.StatusPaymentRequired || r.Code != "insufficient_funds") {
				t.Errorf("concurrent send %d: %v", i, r)
			}
		})
	}
	wg.Wait()
	paid := 0
	for _, s := range codes {
		if s == http.StatusCreated {
			paid++
		}
	}
	if got := balance(t, c, racer); paid != 3 || got != 100 {
		t.Errorf("concurrent sends: %d paid (%v), balance %d; want 3 paid and 100 left", paid, codes, got)
	}
	funded := 0
	for _, p := range packetsOf(t, c, racer) {
		if p.funding == hongbao.Funded {
			funded++
		}
	}
	if funded != paid {
		t.Errorf("%d funded packets for %d paid sends", funded, paid)
	}
	c.CheckInvariants(t)
}
