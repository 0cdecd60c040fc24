package set_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// audienceOf decodes a packet answer's audience ("" body: none).
type audienceJSON struct {
	Size     int      `json:"size"`
	Users    []string `json:"users"`
	Includes *bool    `json:"includes_you"`
}

func audienceOf(t *testing.T, r reply) *audienceJSON {
	t.Helper()
	var p struct {
		Audience *audienceJSON `json:"audience"`
	}
	if err := json.Unmarshal(r.Raw, &p); err != nil {
		t.Fatalf("%v: %v", r, err)
	}
	return p.Audience
}

// sendFor sends a packet for the audience users and returns its ID.
func (h *harness) sendFor(t *testing.T, sender hongbao.UserID, total int64, count int, typ string, users ...hongbao.UserID) string {
	t.Helper()
	ids := make([]string, len(users))
	for i, u := range users {
		ids[i] = u.String()
	}
	r := h.send(sender, map[string]any{"total": total, "count": count, "type": typ, "audience": map[string]any{"users": ids}}, "")
	if r.Status != http.StatusCreated {
		t.Fatalf("send for %v: %v", users, r)
	}
	return r.Str("id")
}

// TestAudienceMemberAndStrangerRace: an exclusive packet's member and a
// stranger open it at once (and the stranger grabs it): the member gets the
// whole amount, the stranger 403 not_in_audience, every round.
func TestAudienceMemberAndStrangerRace(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for round := range 30 {
		sender, member, stranger := dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
		id := h.sendFor(t, sender, 888, 1, "random", member)
		var wg sync.WaitGroup
		var mine, theirs, grab reply
		wg.Go(func() { mine, _ = h.openFinal(member, id) })
		wg.Go(func() { theirs, _ = h.openFinal(stranger, id) })
		wg.Go(func() { grab = h.grab(stranger, id) })
		wg.Wait()
		if mine.Status != http.StatusOK || mine.Str("status") != hongbao.Opened || mine.Amount() != 888 {
			t.Fatalf("round %d: member's open %v, want opened 888", round, mine)
		}
		if !theirs.IsProblem(http.StatusForbidden, "not_in_audience") {
			t.Fatalf("round %d: stranger's open %v, want 403 not_in_audience", round, theirs)
		}
		if grab.Status != http.StatusOK || grab.JSON["can_open"] != false || grab.Str("reason") != "not_in_audience" {
			t.Fatalf("round %d: stranger's grab %v, want can_open false, not_in_audience", round, grab)
		}
		pid, _ := hongbao.ParsePacketID(id)
		p, _ := checkInvariants(t, h.db, pid)
		if len(p.Shares) != 1 || p.Shares[member] != 888 {
			t.Fatalf("round %d: shares %v, want the member's 888 alone", round, p.Shares)
		}
	}
}

// TestAudienceGroupRace: a group's packet with fewer shares than members,
// opened at once by every member and as many strangers: the shares go to
// members only, and add up to the total.
func TestAudienceGroupRace(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	members := distinctUsers(40)
	strangers := distinctUsers(40)
	id := h.sendFor(t, dbtest.FreshUser(), 1000, 10, "random", members...)
	var wg sync.WaitGroup
	answers := make([]reply, len(members)+len(strangers))
	for i, u := range append(append([]hongbao.UserID{}, members...), strangers...) {
		wg.Go(func() { answers[i], _ = h.openFinal(u, id) })
	}
	wg.Wait()
	opened, soldOut := 0, 0
	for i, r := range answers[:len(members)] {
		switch {
		case r.Status == http.StatusOK && r.Str("status") == hongbao.Opened:
			opened++
		case r.IsProblem(http.StatusConflict, "sold_out"):
			soldOut++
		default:
			t.Errorf("member %s: %v", members[i], r)
		}
	}
	for i, r := range answers[len(members):] {
		if !r.IsProblem(http.StatusForbidden, "not_in_audience") {
			t.Errorf("stranger %s: %v, want 403 not_in_audience", strangers[i], r)
		}
	}
	pid, _ := hongbao.ParsePacketID(id)
	p, _ := checkInvariants(t, h.db, pid)
	if opened != 10 || soldOut != 30 || len(p.Shares) != 10 || p.RemainingAmount != 0 {
		t.Fatalf("%d opened, %d sold out, %d shares, %d fen left; want 10, 30, 10, 0", opened, soldOut, len(p.Shares), p.RemainingAmount)
	}
	for u := range p.Shares {
		if !strings.Contains(fmt.Sprint(members), u.String()) {
			t.Errorf("share of %s, not a member", u)
		}
	}
}

// TestAudienceFromMemory: once the server has seen a packet, a stranger is
// refused with MySQL gone: no transaction, no read.
func TestAudienceFromMemory(t *testing.T) {
	own := dbtest.Open(t, dbtest.DSN(t, "a"), 8)
	h := newHarness(t, harnessOpts{StoreDB: own})
	member, stranger := dbtest.FreshUser(), dbtest.FreshUser()
	id := h.sendFor(t, dbtest.FreshUser(), 500, 1, "fixed", member)
	own.Close() // the server's MySQL is gone from here on
	if r := h.open(stranger, id); !r.IsProblem(http.StatusForbidden, "not_in_audience") {
		t.Errorf("stranger's open without MySQL: %v, want 403 not_in_audience", r)
	}
	if r := h.grab(stranger, id); r.Status != http.StatusOK || r.Str("reason") != "not_in_audience" {
		t.Errorf("stranger's grab without MySQL: %v, want not_in_audience", r)
	}
	if r := h.open(member, id); r.Status < 500 {
		t.Errorf("member's open without MySQL: %v, want a 5xx (the open needs its transaction)", r)
	}
}

// TestAudienceOnAnotherServer: a server that never saw the packet, with no
// memcached, still refuses a stranger: its transaction reads the audience.
func TestAudienceOnAnotherServer(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	other := newHarness(t, harnessOpts{Set: h.set, Memcached: "127.0.0.1:1"})
	member, stranger := dbtest.FreshUser(), dbtest.FreshUser()
	id := h.sendFor(t, dbtest.FreshUser(), 300, 3, "fixed", member, dbtest.FreshUser(), dbtest.FreshUser())
	if r, _ := other.openFinal(stranger, id); !r.IsProblem(http.StatusForbidden, "not_in_audience") {
		t.Errorf("stranger on the other server: %v, want 403 not_in_audience", r)
	}
	if r, _ := other.openFinal(member, id); r.Status != http.StatusOK || r.Amount() != 100 {
		t.Errorf("member on the other server: %v, want opened 100", r)
	}
	if r, _ := other.openFinal(stranger, id); !r.IsProblem(http.StatusForbidden, "not_in_audience") {
		t.Errorf("stranger again: %v, want 403 not_in_audience", r)
	}
}

// TestAudienceShown: the send's answer and the sender's detail list the
// audience; anyone else sees its size and whether it names them; a packet
// without one shows none.
func TestAudienceShown(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	sender, stranger := dbtest.FreshUser(), dbtest.FreshUser()
	members := []hongbao.UserID{dbtest.FreshUser(), dbtest.FreshUser()}
	r := h.send(sender, map[string]any{"total": 200, "count": 2, "audience": map[string]any{"users": []string{members[1].String(), members[0].String()}}}, "")
	if r.Status != http.StatusCreated {
		t.Fatal(r)
	}
	id := r.Str("id")
	lo, hi := min(members[0], members[1]).String(), max(members[0], members[1]).String()
	if a := audienceOf(t, r); a == nil || a.Size != 2 || strings.Join(a.Users, ",") != lo+","+hi || a.Includes != nil {
		t.Errorf("send's answer: audience %+v, want the two users in order", a)
	}
	if a := audienceOf(t, h.detail(sender, id)); a == nil || a.Size != 2 || len(a.Users) != 2 {
		t.Errorf("sender's detail: audience %+v", a)
	}
	if a := audienceOf(t, h.detail(members[0], id)); a == nil || a.Size != 2 || a.Users != nil || a.Includes == nil || !*a.Includes {
		t.Errorf("member's detail: audience %+v, want size 2, includes_you, no list", a)
	}
	if a := audienceOf(t, h.detail(stranger, id)); a == nil || a.Users != nil || a.Includes == nil || *a.Includes {
		t.Errorf("stranger's detail: audience %+v, want includes_you false", a)
	}
	if g := h.grab(members[0], id); g.JSON["can_open"] != true {
		t.Errorf("member's grab: %v", g)
	}
	plain := h.mustSend(t, sender, 100, 1, "random")
	if r := h.detail(sender, plain.String()); r.Status != http.StatusOK || r.JSON["audience"] != nil {
		t.Errorf("a packet without audience shows %v", r)
	}
}

// TestAudienceBadInput: a bad audience is a 400 that says what was wrong and
// changes nothing: its Idempotency-Key is still free for a good send.
func TestAudienceBadInput(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	sender := dbtest.FreshUser()
	many := make([]string, 501)
	for i := range many {
		many[i] = fmt.Sprint(i + 1)
	}
	for _, tt := range []struct {
		name string
		body string
		code string
	}{
		{"duplicate", `{"total":300,"count":2,"audience":{"users":["43","44","43"]}}`, "duplicate_audience_user"},
		{"bad user", `{"total":300,"count":1,"audience":{"users":["43","x"]}}`, "invalid_audience_user"},
		{"count over audience", `{"total":300,"count":3,"audience":{"users":["43","44"]}}`, "count_over_audience"},
		{"empty", `{"total":300,"count":1,"audience":{"users":[]}}`, "empty_audience"},
		{"501 users", `{"total":300,"count":1,"audience":{"users":["` + strings.Join(many, `","`) + `"]}}`, "audience_over_limit"},
	} {
		key := dbtest.UniqueName("k")
		if r := h.send(sender, tt.body, key); !r.IsProblem(http.StatusBadRequest, tt.code) {
			t.Errorf("%s: %v, want 400 %s", tt.name, r, tt.code)
		}
		if r := h.send(sender, `{"total":300,"count":1,"audience":{"users":["43"]}}`, key); r.Status != http.StatusCreated {
			t.Errorf("%s: a good send under the same key: %v, want 201 (the bad one claimed nothing)", tt.name, r)
		}
	}
	// A key reused with another audience is another request.
	key := dbtest.UniqueName("k")
	if r := h.send(sender, `{"total":300,"count":1,"audience":{"users":["43"]}}`, key); r.Status != http.StatusCreated {
		t.Fatal(r)
	}
	if r := h.send(sender, `{"total":300,"count":1,"audience":{"users":["44"]}}`, key); !r.IsProblem(http.StatusUnprocessableEntity, "idempotency_key_reused") {
		t.Errorf("same key, other audience: %v, want 422 idempotency_key_reused", r)
	}
}
