package set_test

// Tests of grab: it tells whether an open could still win, and writes
// nothing.

import (
	mrand "math/rand/v2"
	"net/http"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestGrab: grab tells whether an open can still win, and writes nothing.
func TestGrab(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	id := h.mustSend(t, dbtest.FreshUser(), 300, 2, "random").String()
	a, b, c := dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
	wantGrab := func(u hongbao.UserID, canOpen bool, reason string) {
		t.Helper()
		r := h.grab(u, id)
		if r.Status != http.StatusOK || r.JSON["can_open"] != canOpen || r.Str("reason") != reason {
			t.Errorf("grab by %d: %v, want can_open %v reason %q", u, r, canOpen, reason)
		}
	}
	wantGrab(a, true, "")
	wantGrab(c, true, "")
	if r := h.open(a, id); r.Status != http.StatusOK || r.Str("status") != hongbao.Opened {
		t.Fatalf("open by a: %v", r)
	}
	wantGrab(a, false, hongbao.AlreadyOpened)
	wantGrab(b, true, "")
	if r := h.open(b, id); r.Status != http.StatusOK || r.Str("status") != hongbao.Opened {
		t.Fatalf("open by b: %v", r)
	}
	wantGrab(c, false, string(hongbao.SoldOut))
	wantGrab(a, false, hongbao.AlreadyOpened)
	wantGrab(b, false, hongbao.AlreadyOpened)
	pid, _ := hongbao.ParsePacketID(id)
	p, shares := checkInvariants(t, h.db, pid)
	if len(shares) != 2 || p.RemainingCount != 0 {
		t.Errorf("grabs changed the packet: %+v %+v", p, shares)
	}
	unknown, _ := hongbao.NewPacketID(time.Now(), hongbao.Bucket(mrand.IntN(1000)), 4095)
	if r := h.grab(a, unknown.String()); !r.IsProblem(http.StatusNotFound, "not_found") {
		t.Errorf("grab of an unknown packet: %v", r)
	}
	if r := h.grab(a, "abc"); !r.IsProblem(http.StatusBadRequest, "invalid_id") {
		t.Errorf("grab of a malformed id: %v", r)
	}
}
