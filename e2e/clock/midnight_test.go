package clock_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
)

// TestDayTablesAcrossMidnight: the cluster's time is a few minutes before
// midnight (of the configured zone, Asia/Shanghai), server a1 and the
// settler are 3 min past it, server a2 3 min before it. A packet sent on
// a1 lands in the next day's table, one sent on a2 in today's: each in the
// table its ID's time names, whichever host's clock reads it. The server
// still in the old day opens the packet of the new day (and its opens are
// credited exactly once); the server already in the new day finds the
// packet of the old day in its table and refuses it as expired (by its
// clock it is), not as unknown; both servers' details list exactly the
// shares the rows hold; the settler closes both and refunds exactly the
// rest; the audit (every day table of the SET) holds.
func TestDayTablesAcrossMidnight(t *testing.T) {
	const margin, expiry = 3 * time.Minute, 10 * time.Second
	loc := dbtest.Shanghai(t)
	now := time.Now().In(loc)
	y, m, d := now.Date()
	midnight := time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	after, before := midnight.Sub(now)+margin, midnight.Sub(now)-margin
	c := packettest.StartWith(t, clustertest.Options{Sets: 1, Expiry: expiry,
		ClockOffsets: map[string]time.Duration{"server-a1": after, "server-a2": before, "settler-a": after}})
	newDay, oldDay := onHost(t, c, "a", 0, after), onHost(t, c, "a", 1, before)
	if a, b := time.Now().Add(after).In(loc).Day(), time.Now().Add(before).In(loc).Day(); a == b {
		t.Fatalf("the cluster took more than %v to start: both servers are past midnight (day %d)", margin, a)
	}

	const total, count = 1000, 10
	sender := dbtest.FreshUser()
	c.TopUp(t, sender, 2*total)
	late, early := sendRetrying(t, newDay, sender, total, count), sendRetrying(t, oldDay, sender, total, count)
	lateTable, _ := dbtest.Tables(t, late)
	earlyTable, _ := dbtest.Tables(t, early)
	if lateTable == earlyTable {
		t.Fatalf("both packets in %s; want the next day's table for %s and today's for %s", lateTable, late, early)
	}
	for id, want := range map[hongbao.PacketID]time.Time{late: midnight, early: midnight.Add(-time.Minute)} {
		table, _ := dbtest.Tables(t, id)
		if id.Table(loc).Day != want.Day() || dbtest.Count(t, c.DB("a"), "SELECT COUNT(*) FROM "+table+" WHERE id = ?", id) != 1 {
			t.Errorf("packet %s: want its row in the table of day %d, %s", id, want.Day(), table)
		}
	}

	told := map[hongbao.PacketID]map[hongbao.UserID]int64{late: {}, early: {}}
	for i := range 4 {
		h := []*host{oldDay, oldDay, oldDay, newDay}[i]
		u := dbtest.FreshUser()
		r := h.open(t, u, late)
		if r.Status != http.StatusOK || r.Str("status") != hongbao.Opened || r.Amount() < 1 {
			t.Fatalf("open of the next day's packet %s on %s: %v", late, h.addr, r)
		}
		told[late][u] = r.Amount()
	}
	if r := newDay.open(t, dbtest.FreshUser(), early); !r.IsProblem(http.StatusGone, "expired") {
		t.Errorf("open of yesterday's packet %s on the server past midnight (its expiry %v is minutes behind that clock): %v; want 410 expired",
			early, expiry, r)
	}
	// The settler, 6 min ahead of the packet's sender, may close it at once:
	// an open on its sender is either credited or refused as expired.
	for range 2 {
		u := dbtest.FreshUser()
		switch r := oldDay.open(t, u, early); {
		case r.Status == http.StatusOK && r.Str("status") == hongbao.Opened && r.Amount() > 0:
			told[early][u] = r.Amount()
		case r.IsProblem(http.StatusGone, "expired"):
		default:
			t.Fatalf("open of %s on its sender: %v; want opened or 410 expired", early, r)
		}
	}

	var opened int64
	for id, users := range told {
		left := int64(total)
		for _, a := range users {
			left -= a
		}
		keys := []string{hongbao.SendKey(id), hongbao.RefundKey(id)}
		for u := range users {
			keys = append(keys, hongbao.OpenKey(id, u))
		}
		waitEntries(t, c, id, 60*time.Second, keys...)
		checkSettled(t, c, id, sender, total, users)
		opened += total - left
		table, _ := dbtest.Tables(t, id)
		p := dbtest.ReadPacket(t, c.DB("a"), id)
		if p == nil || len(p.Shares) != len(users) || dbtest.Count(t, c.DB("a"), "SELECT COUNT(*) FROM "+table+" WHERE id = ? AND closed", id) != 1 {
			t.Fatalf("packet %s's rows in %s: %+v; want it closed with the %d shares told", id, table, p, len(users))
		}
		for _, h := range []*host{oldDay, newDay} {
			checkDetail(t, h, sender, id, users)
		}
	}
	waitEmpty(t, c, "a", "hb_set.outbox", 30*time.Second)
	if got := c.Balance(t, sender); got != 2*total-opened {
		t.Errorf("sender's balance %d; want %d (topped up %d, %d opened)", got, 2*total-opened, 2*total, opened)
	}
	c.CheckInvariants(t)
}

// sendRetrying sends a packet on h, again while the settler (minutes ahead
// of h) voids the send under way (409 send_cancelled: nothing debited).
func sendRetrying(t *testing.T, h *host, sender hongbao.UserID, total int64, count int) hongbao.PacketID {
	t.Helper()
	for range 5 {
		r := h.do(t, http.MethodPost, "/v1/packets", sender, packettest.SendBody{Total: total, Count: count, Type: "random"}.JSON())
		if r.IsProblem(http.StatusConflict, "send_cancelled") {
			continue
		}
		if r.Status != http.StatusCreated {
			t.Fatalf("send on %s: %v", h.addr, r)
		}
		return packettest.ReplyID(t, r)
	}
	t.Fatalf("send on %s: voided by the sweeper 5 times", h.addr)
	return 0
}

// checkDetail fails unless h's detail of packet id, as its sender sees it,
// lists exactly the shares users were told.
func checkDetail(t *testing.T, h *host, sender hongbao.UserID, id hongbao.PacketID, users map[hongbao.UserID]int64) {
	t.Helper()
	r := h.do(t, http.MethodGet, "/v1/packets/"+id.String(), sender, nil)
	var p api.PacketJSON
	if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &p) != nil {
		t.Fatalf("detail of %s on %s: %v", id, h.addr, r)
	}
	got := map[hongbao.UserID]int64{}
	for _, rec := range p.Records {
		u, err := hongbao.ParseUserID(rec.User)
		if err != nil {
			t.Fatalf("detail of %s on %s: record user %q: %v", id, h.addr, rec.User, err)
		}
		got[u] = rec.Amount
	}
	if len(got) != len(users) || len(p.Records) != len(users) {
		t.Errorf("detail of %s on %s: records %v; want %v", id, h.addr, got, users)
	}
	for u, a := range users {
		if got[u] != a {
			t.Errorf("detail of %s on %s: user %s has %d; want %d", id, h.addr, u, got[u], a)
		}
	}
}
