package set_test

// Tests of sends: a packet sent here is known at once, Idempotency-Key
// retries find the first packet, and a router-minted ID is honoured.

import (
	"net/http"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestSendLearnsPacket: a packet sent here is known at once (nobody can
// hold a share before the send answers), so its first open needs no read;
// its opens then give exact shares and the invariants hold.
func TestSendLearnsPacket(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	if n := h.server.KnownLive(); n != 0 {
		t.Fatalf("a fresh server knows %d packets", n)
	}
	id := h.mustSend(t, 1001, 300, 3, "fixed")
	if n := h.server.KnownLive(); n != 1 {
		t.Fatalf("after a send the server knows %d packets, want 1", n)
	}
	for i, u := range []hongbao.UserID{2001, 2002, 2001, 2003, 2004} {
		r := h.open(u, id.String())
		switch {
		case i < 4 && (r.Status != http.StatusOK || r.Amount() != 100):
			t.Errorf("open %d by %d: %v, want a share of 100", i, u, r)
		case i == 4 && !r.IsProblem(http.StatusConflict, "sold_out"):
			t.Errorf("open %d by %d: %v, want 409 sold_out", i, u, r)
		}
	}
	if n := h.server.KnownLive(); n != 0 {
		t.Errorf("a sold-out packet is still known (%d); the memo answers it", n)
	}
	p, shares := checkInvariants(t, h.db, id)
	if p.RemainingCount != 0 || len(shares) != 3 {
		t.Errorf("packet %+v with %d shares, want sold out with 3", p, len(shares))
	}
}

// TestIdempotencyKey: a retried send finds its first packet; a key reused
// for another packet is refused.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	began := time.Now()
	sender := dbtest.FreshUser()
	body := map[string]any{"total": 1000, "count": 10, "type": "random", "greeting": "hi"}
	key := dbtest.UniqueName("k")
	r1 := h.send(sender, body, key)
	r2 := h.send(sender, body, key)
	if r1.Status != http.StatusCreated || r2.Status != http.StatusCreated {
		t.Fatalf("sends: %v / %v", r1, r2)
	}
	if r1.Str("id") == "" || r1.Str("id") != r2.Str("id") {
		t.Errorf("same key, same body: ids %q and %q", r1.Str("id"), r2.Str("id"))
	}
	r3 := h.send(sender, map[string]any{"total": 1001, "count": 10, "type": "random", "greeting": "hi"}, key)
	if !r3.IsProblem(http.StatusUnprocessableEntity, "idempotency_key_reused") {
		t.Errorf("same key, other body: %v", r3)
	}
	if packets, idem := rowsBySenders(t, h.db, []hongbao.UserID{sender}, began, time.Now()); packets != 1 || idem != 1 {
		t.Errorf("%d packet rows and %d idempotency rows, want 1 and 1", packets, idem)
	}
}

// TestIdempotencyKeyConcurrentRetries: a client that retries one send
// several times at once (same key, same body) gets one packet, and every
// attempt is answered with it: none fails.
func TestIdempotencyKeyConcurrentRetries(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	body := map[string]any{"total": 1000, "count": 10, "type": "random", "greeting": "hi"}
	for round := range 5 {
		began := time.Now()
		sender, key := dbtest.FreshUser(), dbtest.UniqueName("k")
		ids := make([]string, 20)
		failed := make([]reply, 20)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				r := h.send(sender, body, key)
				if r.Status != http.StatusCreated {
					failed[i] = r
				}
				ids[i] = r.Str("id")
			})
		}
		wg.Wait()
		var bad []string
		for i, r := range failed {
			if r.Status != 0 || r.Err != nil {
				bad = append(bad, r.String())
			} else if ids[i] != ids[0] {
				bad = append(bad, "id "+ids[i]+" != "+ids[0])
			}
		}
		if len(bad) > 0 {
			t.Errorf("round %d: %d of %d concurrent sends with one Idempotency-Key failed; first: %s", round, len(bad), len(ids), bad[0])
		}
		if packets, idem := rowsBySenders(t, h.db, []hongbao.UserID{sender}, began, time.Now()); packets != 1 || idem != 1 {
			t.Errorf("round %d: %d packet rows and %d idempotency rows, want 1 and 1", round, packets, idem)
		}
	}
}

// TestRouterMintedID: a send carrying the ID a router minted creates the
// packet under that ID; a retry of it answers the same packet; the ID of
// another packet or a malformed one is refused.
func TestRouterMintedID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	began := time.Now()
	sender := dbtest.FreshUser()
	id, err := hongbao.NewMinter(time.Now).Next(hongbao.BucketFor(sender, []byte(dbtest.UniqueName("k"))))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"total":1000,"count":10,"type":"random","greeting":"hi"}`)
	sendAs := func(u hongbao.UserID, idHeader string, body []byte) reply {
		return h.do(request{method: http.MethodPost, path: "/v1/packets", user: u, body: body,
			header: map[string]string{api.HeaderPacketID: idHeader}})
	}
	r1 := sendAs(sender, id.String(), body)
	r2 := sendAs(sender, id.String(), body)
	if r1.Status != http.StatusCreated || r1.Str("id") != id.String() {
		t.Fatalf("send with a minted ID: %v, want 201 with id %s", r1, id)
	}
	if r2.Status != http.StatusCreated || r2.Str("id") != id.String() {
		t.Errorf("retried send with the same minted ID: %v", r2)
	}
	other := dbtest.FreshUser()
	if r := sendAs(other, id.String(), body); r.Status < 400 || r.Str("id") != "" {
		t.Errorf("another sender's send under a taken ID: %v", r)
	}
	if r := sendAs(sender, id.String(), []byte(`{"total":2000,"count":10}`)); r.Status < 400 || r.Str("id") != "" {
		t.Errorf("another packet under a taken ID: %v", r)
	}
	malformed := dbtest.FreshUser()
	if r := sendAs(malformed, "12x", body); !r.IsProblem(http.StatusBadRequest, "invalid_id") {
		t.Errorf("malformed minted ID: %v", r)
	}
	p, _ := checkInvariants(t, h.db, id)
	if p.Sender != sender || p.Total != 1000 {
		t.Errorf("packet %d: %+v", id, p)
	}
	if packets, _ := rowsBySenders(t, h.db, []hongbao.UserID{sender, other, malformed}, began, time.Now()); packets != 1 {
		t.Errorf("%d packet rows, want 1", packets)
	}
}
