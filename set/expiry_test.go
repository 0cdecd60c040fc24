package set_test

// Tests of a packet past its expiry: no open takes a share, and open, grab
// and detail still answer the shares taken before.

import (
	"net/http"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestExpired: past its expiry a packet takes no open, earlier shares stay.
func TestExpired(t *testing.T) {
	t.Parallel()
	limits := hongbao.DefaultLimits()
	limits.Expiry = 2500 * time.Millisecond
	h := newHarness(t, harnessOpts{Limits: limits})
	pid := h.mustSend(t, dbtest.FreshUser(), 1000, 10, "random")
	id := pid.String()
	a, b := dbtest.FreshUser(), dbtest.FreshUser()
	first := h.open(a, id)
	if first.Status != http.StatusOK || first.Str("status") != hongbao.Opened {
		t.Fatalf("open before expiry: %v", first)
	}
	d := h.detail(a, id)
	expires, err := time.Parse(time.RFC3339, d.Str("expires_at"))
	if err != nil {
		t.Fatalf("expires_at: %v", d)
	}
	time.Sleep(time.Until(expires) + 200*time.Millisecond)
	if r := h.open(b, id); !r.IsProblem(http.StatusGone, "expired") {
		t.Errorf("open after expiry: %v, want 410 expired", r)
	}
	if r := h.grab(b, id); r.Status != http.StatusOK || r.JSON["can_open"] != false || r.Str("reason") != string(hongbao.Expired) {
		t.Errorf("grab after expiry: %v", r)
	}
	if r := h.open(a, id); r.Status != http.StatusOK || r.Str("status") != hongbao.AlreadyOpened || r.Amount() != first.Amount() {
		t.Errorf("reopen after expiry: %v, want already_opened %d", r, first.Amount())
	}
	if r := h.grab(a, id); r.Status != http.StatusOK || r.JSON["can_open"] != false || r.Str("reason") != hongbao.AlreadyOpened {
		t.Errorf("grab by the opener after expiry: %v", r)
	}
	if d := h.detail(b, id); d.Str("status") != string(hongbao.Expired) || num(d, "remaining_count") != 9 {
		t.Errorf("detail after expiry: %s", d.Raw)
	}
	if p, shares := checkInvariants(t, h.db, pid); len(shares) != 1 || p.RemainingCount != 9 {
		t.Errorf("after expiry: %d shares, %d left", len(shares), p.RemainingCount)
	}
}
