package set_test

// Tests of a packet's detail: its records, what is left, the best share, and
// the JSON shapes of the answer.

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestDetail: the records in opening order, the remaining amounts, and the
// best share once all are gone; IDs and users are JSON strings.
func TestDetail(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	sender := dbtest.FreshUser()
	const total, count = 1000, 5
	pid := h.mustSend(t, sender, total, count, "random")
	id := pid.String()
	viewer := dbtest.FreshUser()

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
