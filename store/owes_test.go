package store_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestOwes: a SET owes while its events table holds a pending or a failed
// webhook event (hbctl set remove would drop it), or its outbox a credit;
// the error counts each and names what to do; once all are delivered it
// owes nothing.
func TestOwes(t *testing.T) {
	ctx := context.Background()
	// A private MariaDB: the shared one's outbox holds other tests'
	// unnamed rows, which every SET on it owes.
	db, err := sqldb.Open(dbtest.StartMariaDB(t).DSN, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	loc, set, buckets := dbtest.Shanghai(t), dbtest.UniqueName("ow"), randomBuckets(1)
	dbtest.Own(t, db, set, buckets)
	st := store.New(db, set, loc, time.Now, rand.Int64N).WithEvents()
	off := store.New(db, set, loc, time.Now, rand.Int64N)
	owes := func(name string, want *store.OwesError, says ...string) {
		t.Helper()
		err := st.Owes(ctx)
		var oe *store.OwesError
		switch {
		case want == nil && err != nil:
			t.Fatalf("%s: owes %v, want nothing", name, err)
		case want == nil:
			return
		case !errors.As(err, &oe) || !errors.Is(err, store.ErrOwes) || *oe != *want:
			t.Fatalf("%s: owes %#v (%v), want %#v", name, oe, err, want)
		}
		for _, s := range says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", name, err, s)
			}
		}
	}
	owes("fresh", nil)

	id := createPacket(t, st, buckets[0], packetSpec{hongbao.Fixed, 300, 3}, hongbao.Funded) // packet.sent
	owes("an event pending", &store.OwesError{Set: set, Pending: 1}, "1 pending webhook events", "hbctl webhook list --set "+set)

	evs, err := st.Events(ctx, store.EventFilter{Packet: id})
	if err != nil || len(evs) != 1 {
		t.Fatalf("events of %s: %v %v", id, evs, err)
	}
	failed := evs[0]
	failed.Attempts, failed.Failed, failed.LastError = 30, true, "503"
	if err := st.EventRetry(ctx, failed); err != nil {
		t.Fatal(err)
	}
	owes("an event failed", &store.OwesError{Set: set, Failed: 1}, "1 failed webhook events", "hbctl webhook replay --set "+set)

	if err := st.EventsDelivered(ctx, []int64{failed.Row}); err != nil {
		t.Fatal(err)
	}
	owes("delivered", nil)

	if _, err := off.OpenBatch(ctx, id, []hongbao.UserID{dbtest.FreshUser()}); err != nil { // a credit, no event
		t.Fatal(err)
	}
	owes("a credit", &store.OwesError{Set: set, Outbox: 1}, "1 entries for the wallet")
}
