package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
)

// eventsOf returns the events of packet id as "type id data" lines, in the
// order they were written.
func eventsOf(t *testing.T, st *store.Store, id hongbao.PacketID) []string {
	t.Helper()
	evs, err := st.Events(context.Background(), store.EventFilter{Packet: id})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Type+" "+e.ID+" "+e.Data)
	}
	return out
}

// TestEventsWrittenWithTheirChanges: with webhooks on, a send, the opens
// that sell a packet out, its expiry and its refund's delivery each write
// their events with the exact payloads; with webhooks off nothing is
// written.
func TestEventsWrittenWithTheirChanges(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := setup(t, 1)
	var at atomic.Pointer[time.Time]
	now := func() time.Time { return *at.Load() }
	start := time.Now()
	at.Store(&start)
	st := store.New(db, set, loc, now, rand.Int64N).WithEvents()
	off := store.New(db, set, loc, now, rand.Int64N)

	id, err := minter.Next(buckets[0])
	if err != nil {
		t.Fatal(err)
	}
	sender := dbtest.FreshUser()
	req := hongbao.SendRequest{Total: 300, Count: 3, Type: hongbao.Fixed}
	if _, _, err := st.Create(ctx, store.NewPacket{ID: id, Sender: sender, Req: req, Expiry: time.Hour, Funding: hongbao.Funded}); err != nil {
		t.Fatal(err)
	}
	later := id.Time().Add(1500 * time.Millisecond)
	at.Store(&later)
	users := []hongbao.UserID{dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()}
	if _, err := st.OpenBatch(ctx, id, users); err != nil {
		t.Fatal(err)
	}
	expires := id.Time().Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")
	want := []string{
		fmt.Sprintf(`packet.sent packet.sent:%s {"packet":"%s","sender":"%s","total":300,"count":3,"type":"fixed","expires_at":"%s"}`, id, id, sender, expires),
	}
	for _, u := range users {
		want = append(want, fmt.Sprintf(`packet.opened packet.opened:%s:%s {"packet":"%s","user":"%s","amount":100}`, id, u, id, u))
	}
	want = append(want, fmt.Sprintf(`packet.finished packet.finished:%s {"packet":"%s","best":"%s","best_amount":100,"duration_ms":1500}`, id, id, users[0]))
	checkLines(t, eventsOf(t, st, id), want)

	// Off: a packet sent and opened writes nothing.
	id2 := createPacket(t, off, buckets[0], packetSpec{hongbao.Random, 500, 5}, hongbao.Funded)
	if _, err := off.OpenBatch(ctx, id2, users[:2]); err != nil {
		t.Fatal(err)
	}
	checkLines(t, eventsOf(t, st, id2), nil)

	// Expiry: packet.expired with the refund, then packet.refunded once the
	// refund's delivery is recorded.
	id3 := createPacket(t, off, buckets[0], packetSpec{hongbao.Fixed, 500, 5}, hongbao.Funded)
	if _, err := off.OpenBatch(ctx, id3, users[:1]); err != nil {
		t.Fatal(err)
	}
	p3, err := st.Head(ctx, id3)
	if err != nil {
		t.Fatal(err)
	}
	past := id3.Time().Add(2 * time.Hour)
	at.Store(&past)
	if done, refund, err := st.Close(ctx, id3); err != nil || !done || refund != 400 {
		t.Fatalf("close: %v %d %v", done, refund, err)
	}
	rows, err := st.Outbox(ctx, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range rows {
		if r.Entry.Packet == id3 && r.Entry.Kind == hongbao.KindRefund {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("refund rows of %s: %v", id3, ids)
	}
	if err := st.Delivered(ctx, ids); err != nil {
		t.Fatal(err)
	}
	checkLines(t, eventsOf(t, st, id3), []string{
		fmt.Sprintf(`packet.expired packet.expired:%s {"packet":"%s","sender":"%s","refund":400}`, id3, id3, p3.Sender),
		fmt.Sprintf(`packet.refunded packet.refunded:%s {"packet":"%s","user":"%s","amount":400}`, id3, id3, p3.Sender),
	})
}

func checkLines(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestEventTypesListsEveryType: EventTypes names every event type constant
// of events.go (the OpenAPI document's webhooks are checked against it).
func TestEventTypesListsEveryType(t *testing.T) {
	src, err := os.ReadFile("events.go")
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	for _, m := range regexp.MustCompile(`(?m)^\s+Event\w+\s+= "(packet\.[a-z]+)"`).FindAllStringSubmatch(string(src), -1) {
		consts = append(consts, m[1])
	}
	if len(consts) == 0 || !slices.Equal(consts, store.EventTypes()) {
		t.Fatalf("events.go declares %v, EventTypes returns %v", consts, store.EventTypes())
	}
}
