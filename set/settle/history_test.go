package settle_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
)

// TestHistoryPaging: /v1/me/sent and /v1/me/received list newest first, and
// walking them two at a time with the cursor yields every item exactly once
// with its amount.
func TestHistoryPaging(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{ServersPerSet: 1})
	cl := c.Client.Retrying(10 * time.Second)
	const sender, receiver hongbao.UserID = 700, 701
	c.TopUp(t, sender, 20000)

	type item struct {
		packet string
		amount int64
	}
	var sentItems, received []item // oldest first
	for i, total := range []int64{101, 202, 303, 404, 505} {
		s := cl.Send(sender, hongbao.SendRequest{Total: total, Count: 2, Type: hongbao.Random}, fmt.Sprintf("h-%d", i))
		if s.Status != http.StatusCreated {
			t.Fatalf("send: %v", s)
		}
		sentItems = append(sentItems, item{s.Body.ID, total})
		o := cl.Open(receiver, s.Body.ID)
		if o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
			t.Fatalf("open: %v", o)
		}
		received = append(received, item{s.Body.ID, o.Body.Amount})
		// One credit at a time, so the ledger's order is the opening order.
		waitSettled(t, c, false, 10*time.Second)
	}

	walk := func(name string, page func(cursor string) clustertest.Response[api.HistoryJSON]) []item {
		t.Helper()
		var got []item
		var last time.Time
		cursor := ""
		for pages := 0; ; pages++ {
			r := page(cursor)
			if r.Status != http.StatusOK {
				t.Fatalf("%s page %d: %v", name, pages, r)
			}
			if len(r.Body.Items) > 2 || (r.Body.NextCursor != "" && len(r.Body.Items) != 2) {
				t.Fatalf("%s page %d: %d items with next cursor %q at limit 2", name, pages, len(r.Body.Items), r.Body.NextCursor)
			}
			for _, it := range r.Body.Items {
				at, err := time.Parse(time.RFC3339, it.At)
				if err != nil {
					t.Fatalf("%s: at %q: %v", name, it.At, err)
				}
				if !last.IsZero() && at.After(last) {
					t.Errorf("%s: %s at %s listed after an older item (%s)", name, it.Packet, it.At, last.Format(api.TimeFormat))
				}
				last = at
				got = append(got, item{it.Packet, it.Amount})
			}
			if r.Body.NextCursor == "" {
				return got
			}
			if pages > 10 {
				t.Fatalf("%s: paging does not end", name)
			}
			cursor = r.Body.NextCursor
		}
	}
	reversed := func(xs []item) []item { ys := slices.Clone(xs); slices.Reverse(ys); return ys }
	if got := walk("sent", func(cur string) clustertest.Response[api.HistoryJSON] { return cl.Sent(sender, cur, 2) }); !slices.Equal(got, reversed(sentItems)) {
		t.Errorf("sent, newest first:\n got %v\nwant %v", got, reversed(sentItems))
	}
	if got := walk("received", func(cur string) clustertest.Response[api.HistoryJSON] { return cl.Received(receiver, cur, 2) }); !slices.Equal(got, reversed(received)) {
		t.Errorf("received, newest first:\n got %v\nwant %v", got, reversed(received))
	}
	// The whole list in one page is the same list; others see nothing of it.
	if r := cl.Received(receiver, "", 100); r.Status != http.StatusOK || len(r.Body.Items) != 5 || r.Body.NextCursor != "" {
		t.Errorf("received at limit 100: %v", r)
	}
	if r := cl.Sent(receiver, "", 0); r.Status != http.StatusOK || len(r.Body.Items) != 0 {
		t.Errorf("sent by a user who sent nothing: %v", r)
	}
	if r := cl.Sent(sender, "", 101); r.Status != http.StatusBadRequest || r.Code != "invalid_limit" {
		t.Errorf("limit 101: %v; want 400 invalid_limit", r)
	}
	if r := cl.Sent(sender, "x", 2); r.Status != http.StatusBadRequest || r.Code != "invalid_cursor" {
		t.Errorf("cursor x: %v; want 400 invalid_cursor", r)
	}
	c.CheckInvariants(t)
}
