package set_test

import (
	"net/http"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
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
