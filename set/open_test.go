package set_test

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/router/routertest"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/storetest"
)

// distinctUsers returns n distinct user IDs from a random base.
func distinctUsers(n int) []hongbao.UserID {
	base := mrand.Int64N(1<<61) + 1
	us := make([]hongbao.UserID, n)
	for i := range us {
		us[i] = hongbao.UserID(base + int64(i))
	}
	return us
}

// TestOpenRace: 1000 distinct users race for one 100-share packet. Exactly
// 100 win, their amounts add up to the total, everyone else is told
// sold_out, and the database holds exactly the answered shares.
func TestOpenRace(t *testing.T) {
	for _, tc := range []struct {
		typ   string
		total int64
	}{{"random", 20000}, {"fixed", 10000}} {
		t.Run(tc.typ, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			const count, clients = 100, 1000
			id := h.mustSend(t, storetest.FreshUser(), tc.total, count, tc.typ)
			users := distinctUsers(clients)
			got := h.openAtOnce(id, users)

			opened := map[hongbao.UserID]int64{}
			var sum int64
			soldOut := 0
			var bad firstErrors
			for _, a := range got.list {
				kind, err := routertest.Classify(a.R)
				switch {
				case err != nil:
					bad.add("user %d: %v", a.User, err)
				case a.won():
					if _, dup := opened[a.User]; dup {
						t.Errorf("user %d answered opened twice", a.User)
					}
					opened[a.User] = a.R.Amount()
					sum += a.R.Amount()
					if tc.typ == "fixed" && a.R.Amount() != tc.total/count {
						t.Errorf("fixed packet: user %d got %d fen, want %d", a.User, a.R.Amount(), tc.total/count)
					}
				case kind == "sold_out":
					soldOut++
				default:
					bad.add("user %d opened once and was answered %v", a.User, a.R)
				}
			}
			bad.report(t, "bad answers")
			got.summary(t)
			t.Logf("%d opened, %d sold out", len(opened), soldOut)
			if len(opened) != count || soldOut != clients-count {
				t.Errorf("%d opened and %d sold_out, want %d and %d", len(opened), soldOut, count, clients-count)
			}
			if sum != tc.total {
				t.Errorf("opened amounts sum to %d, want %d", sum, tc.total)
			}
			p := storetest.CheckPacket(t, h.db, id)
			if p.RemainingCount != 0 || p.RemainingAmount != 0 {
				t.Errorf("after the race: %d shares and %d fen left", p.RemainingCount, p.RemainingAmount)
			}
			assertSameShares(t, id, opened, p.Shares)
		})
	}
}

// assertSameShares compares the shares the clients were told with the rows.
func assertSameShares(t *testing.T, id hongbao.PacketID, told, db map[hongbao.UserID]int64) {
	t.Helper()
	for u, amount := range told {
		if got, ok := db[u]; !ok {
			t.Errorf("packet %d: user %d was told %d fen but has no row", id, u, amount)
		} else if got != amount {
			t.Errorf("packet %d: user %d was told %d fen, the row says %d", id, u, amount, got)
		}
	}
	for u, amount := range db {
		if _, ok := told[u]; !ok {
			t.Errorf("packet %d: user %d has a row of %d fen nobody was told about", id, u, amount)
		}
	}
}

// TestOneUserConcurrentOpens: one user opening one packet 50 times at once
// gets one share; every answer names it.
func TestOneUserConcurrentOpens(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.mustSend(t, storetest.FreshUser(), 1000, 10, "random")
	user := storetest.FreshUser()
	got := h.openAtOnce(id, slices.Repeat([]hongbao.UserID{user}, 50))
	got.summary(t)
	kinds := map[string]int{}
	amounts := map[int64]int{}
	unknown := 0
	for _, a := range got.list {
		unknown += a.Tries.Unknown
		kind, err := routertest.Classify(a.R)
		if err != nil {
			t.Error(err)
			continue
		}
		kinds[kind]++
		amounts[a.R.Amount()]++
	}
	switch {
	case kinds[hongbao.Opened]+kinds[hongbao.AlreadyOpened] != 50:
		t.Errorf("answers %v, want 1 opened and 49 already_opened", kinds)
	case unknown == 0 && kinds[hongbao.Opened] != 1:
		t.Errorf("answers %v, want 1 opened and 49 already_opened", kinds)
	case kinds[hongbao.Opened] > 1:
		t.Errorf("answers %v: more than one opened", kinds)
	}
	if len(amounts) != 1 {
		t.Errorf("answers name several amounts: %v", amounts)
	}
	p, shares := checkInvariants(t, h.db, id)
	if len(shares) != 1 || shares[0].User != user || p.RemainingCount != 9 {
		t.Fatalf("rows %+v, remaining_count %d: want one share of user %d", shares, p.RemainingCount, user)
	}
	if amounts[shares[0].Amount] != 50 {
		t.Errorf("the row says %d fen, the answers %v", shares[0].Amount, amounts)
	}
}

// TestManyPacketsOverlappingUsers: 200 packets opened at once by 300 users,
// each opening a random subset of 40 of them.
func TestManyPacketsOverlappingUsers(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	const packets, users, perUser = 200, 300, 40
	ids := make([]hongbao.PacketID, packets)
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= packets {
					return
				}
				count := 5 + mrand.IntN(16)
				typ, total := "random", int64(count)+mrand.Int64N(int64(20000-count))
				if i%3 == 0 {
					typ, total = "fixed", int64(count)*(1+mrand.Int64N(20000/int64(count)))
				}
				r := h.send(storetest.FreshUser(), map[string]any{"total": total, "count": count, "type": typ}, "")
				id, err := hongbao.ParsePacketID(r.Str("id"))
				if r.Status != http.StatusCreated || err != nil {
					t.Errorf("send %d: %v", i, r)
					return
				}
				ids[i] = id
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	us := distinctUsers(users)
	start := make(chan struct{})
	var got answers
	for _, u := range us {
		// Each user opens its packets a few at a time, as a client
		// tapping through several chats would.
		mine := make(chan int, perUser)
		for _, i := range mrand.Perm(packets)[:perUser] {
			mine <- i
		}
		close(mine)
		for range 4 {
			wg.Go(func() {
				<-start
				for i := range mine {
					got.open(h, u, ids[i])
				}
			})
		}
	}
	began := time.Now()
	close(start)
	wg.Wait()
	t.Logf("%d opens in %v", len(got.list), time.Since(began))

	told := got.told(t)
	for _, id := range ids {
		assertSameShares(t, id, told[id], storetest.CheckPacket(t, h.db, id).Shares)
	}
}

// TestGrab: grab tells whether an open can still win, and writes nothing.
func TestGrab(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	id := h.mustSend(t, storetest.FreshUser(), 300, 2, "random").String()
	a, b, c := storetest.FreshUser(), storetest.FreshUser(), storetest.FreshUser()
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

// TestDetail: the records in opening order, the remaining amounts, and the
// best share once all are gone; IDs and users are JSON strings.
func TestDetail(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	sender := storetest.FreshUser()
	const total, count = 1000, 5
	pid := h.mustSend(t, sender, total, count, "random")
	id := pid.String()
	viewer := storetest.FreshUser()

	r := h.detail(viewer, id)
	if r.Status != http.StatusOK {
		t.Fatalf("detail: %v", r)
	}
	checkDetailShape(t, r, id, sender)
	if r.Str("status") != "active" || num(r, "remaining_count") != count || num(r, "remaining_amount") != total ||
		num(r, "total") != total || num(r, "count") != count || r.Str("type") != "random" || r.Str("greeting") != "恭喜发财" {
		t.Errorf("fresh packet: %s", r.Raw)
	}
	if recs, ok := r.JSON["records"].([]any); !ok || len(recs) != 0 {
		t.Errorf("fresh packet: records %#v, want []", r.JSON["records"])
	}
	if _, ok := r.JSON["best"]; ok {
		t.Errorf("fresh packet has a best: %s", r.Raw)
	}

	openers := distinctUsers(count + 1)
	var told []int64
	var sum int64
	for i, u := range openers[:count] {
		o := h.open(u, id)
		if o.Status != http.StatusOK || o.Str("status") != hongbao.Opened {
			t.Fatalf("open %d: %v", i, o)
		}
		told = append(told, o.Amount())
		sum += o.Amount()
		r := h.detail(viewer, id)
		checkDetailShape(t, r, id, sender)
		recs, _ := r.JSON["records"].([]any)
		if len(recs) != i+1 {
			t.Fatalf("after %d opens: %d records", i+1, len(recs))
		}
		for j, rec := range recs {
			m, _ := rec.(map[string]any)
			if m["user"] != openers[j].String() || fmt.Sprint(m["amount"]) != fmt.Sprint(told[j]) {
				t.Errorf("record %d: %v, want user %d amount %d", j, m, openers[j], told[j])
			}
		}
		if num(r, "remaining_count") != int64(count-i-1) || num(r, "remaining_amount") != total-sum {
			t.Errorf("after %d opens: remaining %d shares %d fen, want %d and %d", i+1,
				num(r, "remaining_count"), num(r, "remaining_amount"), count-i-1, total-sum)
		}
		_, hasBest := r.JSON["best"]
		if i < count-1 {
			if hasBest || r.Str("status") != "active" {
				t.Errorf("after %d of %d opens: status %q, best present %v", i+1, count, r.Str("status"), hasBest)
			}
			continue
		}
		if r.Str("status") != string(hongbao.SoldOut) {
			t.Errorf("all shares gone: status %q", r.Str("status"))
		}
		best := 0
		for j := range told {
			if told[j] > told[best] {
				best = j
			}
		}
		if r.Str("best") != openers[best].String() {
			t.Errorf("best %v, want %s (shares %v)", r.JSON["best"], openers[best], told)
		}
	}
	if sum != total {
		t.Errorf("shares sum to %d, want %d", sum, total)
	}
	if o := h.open(openers[count], id); !o.IsProblem(http.StatusConflict, "sold_out") {
		t.Errorf("open of a sold-out packet: %v", o)
	}
	checkInvariants(t, h.db, pid)

	// Equal shares: the best is the earliest.
	fixed := h.mustSend(t, sender, 300, 3, "fixed").String()
	for _, u := range openers[:3] {
		if o := h.open(u, fixed); o.Status != http.StatusOK || o.Amount() != 100 {
			t.Fatalf("open of a fixed packet: %v", o)
		}
	}
	if r := h.detail(viewer, fixed); r.Str("best") != openers[0].String() || r.Str("type") != "fixed" {
		t.Errorf("fixed packet: best %v, want the first opener %s", r.JSON["best"], openers[0])
	}
	if r := h.detail(viewer, "1.5"); !r.IsProblem(http.StatusBadRequest, "invalid_id") {
		t.Errorf("detail of a malformed id: %v", r)
	}
}

func num(r reply, k string) int64 {
	n, ok := r.Num(k)
	if !ok {
		return -1
	}
	return n
}

// checkDetailShape checks the types of a detail answer: IDs and users as
// decimal strings, times in RFC 3339.
func checkDetailShape(t *testing.T, r reply, id string, sender hongbao.UserID) {
	t.Helper()
	if got, ok := r.JSON["id"].(string); !ok || got != id {
		t.Errorf("id %#v, want the string %q", r.JSON["id"], id)
	}
	if got, ok := r.JSON["sender"].(string); !ok || got != sender.String() {
		t.Errorf("sender %#v, want the string %q", r.JSON["sender"], sender)
	}
	created, err1 := time.Parse(time.RFC3339, r.Str("created_at"))
	expires, err2 := time.Parse(time.RFC3339, r.Str("expires_at"))
	if err1 != nil || err2 != nil {
		t.Errorf("times not RFC 3339: %v %v", err1, err2)
	} else if expires.Sub(created) != 24*time.Hour {
		t.Errorf("expires_at - created_at = %v, want 24h", expires.Sub(created))
	}
	if pid, err := hongbao.ParsePacketID(id); err == nil && !created.Equal(pid.Time()) {
		t.Errorf("created_at %s, the ID says %s", created, pid.Time())
	}
	recs, ok := r.JSON["records"].([]any)
	if !ok {
		t.Errorf("records %#v is not an array", r.JSON["records"])
	}
	for _, rec := range recs {
		m, _ := rec.(map[string]any)
		if _, ok := m["user"].(string); !ok {
			t.Errorf("record user %#v is not a string", m["user"])
		}
		if _, err := time.Parse(time.RFC3339, fmt.Sprint(m["at"])); err != nil {
			t.Errorf("record at: %v", err)
		}
	}
	if b, ok := r.JSON["best"]; ok {
		if _, ok := b.(string); !ok {
			t.Errorf("best %#v is not a string", b)
		}
	}
}

// TestExpired: past its expiry a packet takes no open, earlier shares stay.
func TestExpired(t *testing.T) {
	t.Parallel()
	limits := hongbao.DefaultLimits()
	limits.Expiry = 2500 * time.Millisecond
	h := newHarness(t, harnessOpts{Limits: limits})
	pid := h.mustSend(t, storetest.FreshUser(), 1000, 10, "random")
	id := pid.String()
	a, b := storetest.FreshUser(), storetest.FreshUser()
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

// TestIdempotencyKey: a retried send finds its first packet; a key reused
// for another packet is refused.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	began := time.Now()
	sender := storetest.FreshUser()
	body := map[string]any{"total": 1000, "count": 10, "type": "random", "greeting": "hi"}
	key := storetest.UniqueName("k")
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
		sender, key := storetest.FreshUser(), storetest.UniqueName("k")
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
	sender := storetest.FreshUser()
	id, err := hongbao.NewMinter(time.Now).Next(hongbao.BucketFor(sender, []byte(storetest.UniqueName("k"))))
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
	other := storetest.FreshUser()
	if r := sendAs(other, id.String(), body); r.Status < 400 || r.Str("id") != "" {
		t.Errorf("another sender's send under a taken ID: %v", r)
	}
	if r := sendAs(sender, id.String(), []byte(`{"total":2000,"count":10}`)); r.Status < 400 || r.Str("id") != "" {
		t.Errorf("another packet under a taken ID: %v", r)
	}
	malformed := storetest.FreshUser()
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

// TestBadInput: every malformed or unauthorised request is answered with
// problem JSON naming the problem, and writes nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	began := time.Now()
	huge := `{"total":1000,"count":10,"greeting":"` + strings.Repeat("x", 4<<20) + `"}`
	type sendCase struct {
		name   string
		body   string
		key    string
		status int
		code   string
	}
	cases := []sendCase{
		{"negative total", `{"total":-100,"count":1}`, "", 400, "invalid_total"},
		{"zero total", `{"total":0,"count":1}`, "", 400, "invalid_total"},
		{"fractional total", `{"total":100.5,"count":1}`, "", 400, "invalid_total"},
		{"integral float total", `{"total":100.0,"count":1}`, "", 400, "invalid_total"},
		{"exponent total", `{"total":1e3,"count":1}`, "", 400, "invalid_total"},
		{"string total", `{"total":"1000","count":1}`, "", 400, "invalid_total"},
		{"null total", `{"total":null,"count":1}`, "", 400, "null_value"},
		{"overflowing total", `{"total":99999999999999999999,"count":1}`, "", 400, "invalid_total"},
		{"missing total", `{"count":1}`, "", 400, "invalid_total"},
		{"zero count", `{"total":1000,"count":0}`, "", 400, "invalid_count"},
		{"negative count", `{"total":1000,"count":-1}`, "", 400, "invalid_count"},
		{"fractional count", `{"total":1000,"count":2.5}`, "", 400, "invalid_count"},
		{"total below count", `{"total":5,"count":10}`, "", 400, "total_below_count"},
		{"total over limit", `{"total":20001,"count":10}`, "", 400, "total_over_limit"},
		{"count over limit", `{"total":20000,"count":101}`, "", 400, "count_over_limit"},
		{"huge count", `{"total":20000,"count":9999999999999}`, "", 400, "count_over_limit"},
		{"unknown type", `{"total":1000,"count":10,"type":"lucky"}`, "", 400, "invalid_type"},
		{"numeric type", `{"total":1000,"count":10,"type":1}`, "", 400, "invalid_type"},
		{"fixed not divisible", `{"total":1000,"count":3,"type":"fixed"}`, "", 400, "fixed_not_divisible"},
		{"greeting too long", `{"total":1000,"count":10,"greeting":"` + strings.Repeat("x", 201) + `"}`, "", 400, "greeting_too_long"},
		{"unknown field", `{"total":1000,"count":10,"sender":"1"}`, "", 400, "unknown_field"},
		{"malformed JSON", `{"total":1000,`, "", 400, "malformed_json"},
		{"array", `[1000,10]`, "", 400, "malformed_json"},
		{"null", `null`, "", 400, "malformed_json"},
		{"empty", ``, "", 400, "malformed_json"},
		{"trailing garbage", `{"total":1000,"count":10} x`, "", 400, "trailing_data"},
		{"4 MiB body", huge, "", 413, "body_too_large"},
		{"long idempotency key", `{"total":1000,"count":10}`, strings.Repeat("k", 201), 400, "invalid_idempotency_key"},
	}
	var senders []hongbao.UserID
	for _, c := range cases {
		sender := storetest.FreshUser()
		senders = append(senders, sender)
		r := h.send(sender, c.body, c.key)
		if !r.IsProblem(c.status, c.code) {
			t.Errorf("%s: %v, want %d %s problem", c.name, r, c.status, c.code)
		}
	}

	// Requests no router signed.
	good := []byte(`{"total":1000,"count":10}`)
	other := newSigner([]byte("some-other-secret-0123456789"), time.Now)
	stale := newSigner(testSecret, func() time.Time { return time.Now().Add(-2 * time.Minute) })
	future := newSigner(testSecret, func() time.Time { return time.Now().Add(2 * time.Minute) })
	forbidden := func(name string, rq request) {
		t.Helper()
		if r := h.do(rq); !r.IsProblem(http.StatusForbidden, "forbidden") {
			t.Errorf("%s: %v, want 403 forbidden", name, r)
		}
	}
	for _, f := range []struct {
		name string
		rq   func(u hongbao.UserID) request
	}{
		{"unsigned", func(u hongbao.UserID) request { return request{user: u, unsigned: true} }},
		{"forged", func(u hongbao.UserID) request { return request{user: u, signer: other} }},
		{"stale", func(u hongbao.UserID) request { return request{user: u, signer: stale} }},
		{"future", func(u hongbao.UserID) request { return request{user: u, signer: future} }},
	} {
		sender := storetest.FreshUser()
		senders = append(senders, sender)
		rq := f.rq(sender)
		rq.method, rq.path, rq.body = http.MethodPost, "/v1/packets", good
		forbidden("send "+f.name, rq)
	}
	// A signature for one user does not carry over to another.
	{
		signedFor, claimed := storetest.FreshUser(), storetest.FreshUser()
		senders = append(senders, signedFor, claimed)
		req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/packets", strings.NewReader(string(good)))
		newSigner(testSecret, time.Now).Sign(req, signedFor)
		req.Header.Set(api.HeaderUser, claimed.String())
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("signature of one user, header of another: %d", resp.StatusCode)
		}
	}

	// Malformed and unknown packet IDs, on every packet endpoint.
	opener := storetest.FreshUser()
	offBucket := int64(time.Since(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)).Milliseconds())<<22 | 1000<<12
	unknownOld, _ := hongbao.NewPacketID(time.Date(2024, 6, 15, 12, 0, 0, 0, time.UTC), 123, 7)
	unknownNow, _ := hongbao.NewPacketID(time.Now(), hongbao.Bucket(mrand.IntN(1000)), 4095)
	for _, c := range []struct {
		id     string
		status int
		code   string
	}{
		{"abc", 400, "invalid_id"},
		{"-1", 400, "invalid_id"},
		{"1.5", 400, "invalid_id"},
		{"0", 400, "invalid_id"},
		{"0123", 400, "invalid_id"},
		{"+123", 400, "invalid_id"},
		{"99999999999999999999", 400, "invalid_id"},
		{fmt.Sprint(offBucket), 400, "invalid_id"},
		{unknownOld.String(), 404, "not_found"},
		{unknownNow.String(), 404, "not_found"},
	} {
		for _, do := range []struct {
			name string
			f    func(hongbao.UserID, string) reply
		}{{"open", h.open}, {"grab", h.grab}, {"detail", h.detail}} {
			if r := do.f(opener, c.id); !r.IsProblem(c.status, c.code) {
				t.Errorf("%s %q: %v, want %d %s", do.name, c.id, r, c.status, c.code)
			}
		}
	}

	// Unsigned opens of a real packet take no share.
	pid := h.mustSend(t, storetest.FreshUser(), 1000, 10, "random")
	for _, f := range []struct {
		name string
		rq   request
	}{
		{"unsigned", request{unsigned: true}},
		{"forged", request{signer: other}},
		{"stale", request{signer: stale}},
	} {
		rq := f.rq
		rq.user, rq.method, rq.path = opener, http.MethodPost, "/v1/packets/"+pid.String()+"/open"
		forbidden("open "+f.name, rq)
	}
	if p, shares := checkInvariants(t, h.db, pid); len(shares) != 0 || p.RemainingCount != 10 {
		t.Errorf("refused opens took shares: %+v", shares)
	}

	packets, idem := rowsBySenders(t, h.db, senders, began, time.Now())
	if packets != 0 || idem != 0 {
		t.Errorf("refused sends wrote %d packet rows and %d idempotency rows", packets, idem)
	}
}

func newSigner(secret []byte, now func() time.Time) *api.Internal {
	return api.NewInternal(secret, now)
}

// TestMemcachedStopped: the cache dies in the middle of a load; every open
// still gets a final, correct answer from MySQL.
func TestMemcachedStopped(t *testing.T) {
	mc := storetest.StartMemcached(t)
	h := newHarness(t, harnessOpts{Memcached: mc.Addr})
	const packets, openers, count = 20, 30, 20
	ids := make([]hongbao.PacketID, packets)
	for i := range ids {
		ids[i] = h.mustSend(t, storetest.FreshUser(), 2000, count, []string{"random", "fixed"}[i%2])
	}
	us := distinctUsers(openers)
	start := make(chan struct{})
	half := make(chan struct{})
	var done atomic.Int64
	var got answers
	var wg sync.WaitGroup
	for _, id := range ids {
		for _, u := range us {
			wg.Go(func() {
				<-start
				time.Sleep(time.Duration(mrand.IntN(400)) * time.Millisecond)
				got.open(h, u, id)
				if done.Add(1) == packets*openers/2 {
					close(half)
				}
			})
		}
	}
	close(start)
	<-half
	mc.Stop()
	t.Logf("memcached stopped after %d of %d answers", done.Load(), packets*openers)
	wg.Wait()

	told := got.told(t)
	for _, id := range ids {
		p := storetest.CheckPacket(t, h.db, id)
		assertSameShares(t, id, told[id], p.Shares)
		if p.RemainingCount != 0 {
			t.Errorf("packet %d: %d shares left after %d openers", id, p.RemainingCount, openers)
		}
	}
	// With the cache still down, opens and grabs are answered from MySQL.
	for _, id := range ids[:4] {
		for _, u := range us {
			r := h.open(u, id.String())
			g := h.grab(u, id.String())
			if amount, ok := told[id][u]; ok {
				if r.Status != http.StatusOK || r.Str("status") != hongbao.AlreadyOpened || r.Amount() != amount {
					t.Errorf("packet %d user %d reopens: %v, want already_opened %d", id, u, r, amount)
				}
				if g.Status != http.StatusOK || g.JSON["can_open"] != false || g.Str("reason") != hongbao.AlreadyOpened {
					t.Errorf("packet %d user %d grabs: %v, want already_opened", id, u, g)
				}
				continue
			}
			if !r.IsProblem(http.StatusConflict, "sold_out") {
				t.Errorf("packet %d user %d reopens: %v, want sold_out", id, u, r)
			}
			if g.Status != http.StatusOK || g.JSON["can_open"] != false || g.Str("reason") != string(hongbao.SoldOut) {
				t.Errorf("packet %d user %d grabs: %v, want sold_out", id, u, g)
			}
		}
	}
}

// TestWrongSet: a SET refuses, and writes nothing for, buckets it does not
// own in its MySQL fence.
func TestWrongSet(t *testing.T) {
	t.Parallel()
	owner := newHarness(t, harnessOpts{})
	owned := []hongbao.Bucket{0, 1, 2, 3, 4}
	h := newHarness(t, harnessOpts{Buckets: owned})
	began := time.Now()

	// A packet of a bucket h does not own.
	var pid hongbao.PacketID
	for {
		pid = owner.mustSend(t, storetest.FreshUser(), 1000, 10, "random")
		if pid.Bucket() >= 5 {
			break
		}
	}
	for range 3 {
		r := h.open(storetest.FreshUser(), pid.String())
		if !r.IsProblem(http.StatusMisdirectedRequest, "wrong_set") {
			t.Errorf("open on the wrong SET: %v, want 421 wrong_set", r)
		}
	}
	// Concurrent opens too (they may share a batch).
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			r, _ := h.openFinal(storetest.FreshUser(), pid.String())
			if !r.IsProblem(http.StatusMisdirectedRequest, "wrong_set") {
				t.Errorf("concurrent open on the wrong SET: %v", r)
			}
		})
	}
	wg.Wait()
	if p, shares := checkInvariants(t, h.db, pid); len(shares) != 0 || p.RemainingCount != 10 {
		t.Errorf("the wrong SET took shares: %+v", shares)
	}
	// The owner still serves it.
	if r := owner.open(storetest.FreshUser(), pid.String()); r.Status != http.StatusOK || r.Str("status") != hongbao.Opened {
		t.Errorf("open on the owning SET: %v", r)
	}

	// Sends whose bucket h does not own are refused; sends it owns work.
	wrongSender, rightSender := storetest.FreshUser(), storetest.FreshUser()
	var wrongKey, rightKey string
	for i := 0; wrongKey == "" || rightKey == ""; i++ {
		k := fmt.Sprintf("key-%d", i)
		if b := hongbao.BucketFor(wrongSender, []byte(k)); b >= 5 && wrongKey == "" {
			wrongKey = k
		}
		if b := hongbao.BucketFor(rightSender, []byte(k)); b < 5 && rightKey == "" {
			rightKey = k
		}
	}
	body := map[string]any{"total": 100, "count": 2}
	if r := h.send(wrongSender, body, wrongKey); !r.IsProblem(http.StatusMisdirectedRequest, "wrong_set") {
		t.Errorf("send to a bucket of another SET: %v", r)
	}
	if packets, idem := rowsBySenders(t, h.db, []hongbao.UserID{wrongSender}, began, time.Now()); packets != 0 || idem != 0 {
		t.Errorf("refused send wrote %d packet rows and %d idempotency rows", packets, idem)
	}
	r := h.send(rightSender, body, rightKey)
	if r.Status != http.StatusCreated {
		t.Fatalf("send to an owned bucket: %v", r)
	}
	own, _ := hongbao.ParsePacketID(r.Str("id"))
	if r := h.open(storetest.FreshUser(), own.String()); r.Status != http.StatusOK || r.Str("status") != hongbao.Opened {
		t.Errorf("open in an owned bucket: %v", r)
	}
	checkInvariants(t, h.db, own)
}

// TestFenceCoversEveryWrite: once a bucket has moved away from a SET (its
// fence row deleted), no write of that SET's store commits for it: the open,
// the close and the funding of a pending send all fail with wrong_set and
// change nothing (DESIGN.md: "no write commits for a bucket that has moved
// away").
func TestFenceCoversEveryWrite(t *testing.T) {
	t.Parallel()
	db := storetest.DB(t, "a", 8)
	ctx := t.Context()
	name := storetest.UniqueName("t")
	const b = hongbao.Bucket(7)
	if err := schema.Own(ctx, db, name, 1, []hongbao.Bucket{b}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DELETE FROM hb_fence.owned WHERE set_name = ?", name)
	})
	loc := storetest.Shanghai(t)
	st := store.New(db, name, loc, time.Now, mrand.Int64N)
	minter := hongbao.NewMinter(time.Now)
	create := func(funding hongbao.Funding) hongbao.PacketID {
		t.Helper()
		id, err := minter.Next(b)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = st.Create(ctx, store.NewPacket{ID: id, Sender: storetest.FreshUser(), Expiry: time.Hour, Funding: funding,
			Req: hongbao.SendRequest{Total: 100, Count: 2, Type: hongbao.Random}})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	pending, funded := create(hongbao.Pending), create(hongbao.Funded)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Disown(ctx, tx, name, []hongbao.Bucket{b}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	if _, err := st.OpenBatch(ctx, funded, []hongbao.UserID{storetest.FreshUser()}); !errors.Is(err, hongbao.ErrWrongSet) {
		t.Errorf("OpenBatch after the move: %v, want wrong_set", err)
	}
	if _, _, err := st.Close(ctx, funded); !errors.Is(err, hongbao.ErrWrongSet) {
		t.Errorf("Close after the move: %v, want wrong_set", err)
	}
	if _, err := st.Fund(ctx, pending, hongbao.Funded); !errors.Is(err, hongbao.ErrWrongSet) {
		t.Errorf("Fund after the move: %v, want wrong_set", err)
	}
	p := storetest.ReadPacket(t, db, pending)
	if p == nil {
		t.Fatalf("packet %d is gone from the moved-away SET", pending)
	}
	if p.Funding != hongbao.Pending {
		t.Errorf("the moved-away SET funded packet %d: funding %d", pending, p.Funding)
	}
	if n := storetest.Count(t, db, "SELECT COUNT(*) FROM hb_set.pending WHERE packet_id = ?", pending); n != 1 {
		t.Errorf("the moved-away SET removed packet %d from hb_set.pending", pending)
	}
	if _, shares := checkInvariants(t, db, funded); len(shares) != 0 {
		t.Errorf("shares taken after the move: %+v", shares)
	}
}

// TestCacheLoss: memcached loses its entries (eviction, restart). The cache
// is only an optimisation (store/cache.go: "a stale or lost entry makes the
// server do more work, never answer differently"), so every answer must be
// the same as with the entries in place.
func TestCacheLoss(t *testing.T) {
	t.Parallel()
	mc := storetest.StartMemcached(t)
	h := newHarness(t, harnessOpts{Memcached: mc.Addr})
	flush := func() {
		t.Helper()
		if err := memcache.New(mc.Addr).FlushAll(); err != nil {
			t.Fatal(err)
		}
	}
	live := h.mustSend(t, storetest.FreshUser(), 1000, 10, "random").String()
	over := h.mustSend(t, storetest.FreshUser(), 200, 2, "random").String()
	a, b, c := storetest.FreshUser(), storetest.FreshUser(), storetest.FreshUser()
	first := map[string]reply{}
	for _, id := range []string{live, over} {
		first[id] = h.open(a, id)
		if r := first[id]; r.Status != http.StatusOK || r.Str("status") != hongbao.Opened {
			t.Fatalf("open: %v", r)
		}
	}
	if r := h.open(b, over); r.Status != http.StatusOK || r.Str("status") != hongbao.Opened {
		t.Fatalf("open: %v", r)
	}
	flush()
	for _, id := range []string{live, over} {
		if r := h.grab(a, id); r.Status != http.StatusOK || r.JSON["can_open"] != false || r.Str("reason") != hongbao.AlreadyOpened {
			t.Errorf("grab by an opener after the cache lost its entries: %v, want can_open false, already_opened", r)
		}
		flush()
		if r := h.open(a, id); r.Status != http.StatusOK || r.Str("status") != hongbao.AlreadyOpened || r.Amount() != first[id].Amount() {
			t.Errorf("reopen after the cache lost its entries: %v, want already_opened %d", r, first[id].Amount())
		}
		flush()
	}
	if r := h.grab(c, over); r.Status != http.StatusOK || r.JSON["can_open"] != false || r.Str("reason") != string(hongbao.SoldOut) {
		t.Errorf("grab of a sold-out packet after the cache lost its entries: %v", r)
	}
	flush()
	if r := h.open(c, over); !r.IsProblem(http.StatusConflict, "sold_out") {
		t.Errorf("open of a sold-out packet after the cache lost its entries: %v", r)
	}
	if r := h.grab(c, live); r.Status != http.StatusOK || r.JSON["can_open"] != true {
		t.Errorf("grab by a newcomer: %v", r)
	}
}
