package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store"
)

// A snapshot reading a day table whose packets it sees but whose detail
// table was created after it began (MySQL's error 1412 on the join) is
// not a consistent view: it fails, to be opened again, instead of leaving
// the day out as a table younger than itself (then the audit found
// packets "in no SET's records" whose debits the ledger had). Writers
// create a day's tables before its first packet (schema.Ensure), so only
// a race the ensure lost could make one; a day table created after the
// snapshot (both tables younger) is still empty to it.
func TestSnapshotRefusesADetailTableYoungerThanItsPackets(t *testing.T) {
	db, loc, set, _ := setup(t, 0)
	ctx := t.Context()
	id := missingDayTable(t, db)
	dbtest.Own(t, db, set, []hongbao.Bucket{id.Bucket()})
	st := store.New(db, set, loc, time.Now, seeded(3))
	if _, _, err := st.Create(ctx, store.NewPacket{ID: id, Sender: dbtest.FreshUser(),
		Req: hongbao.SendRequest{Total: 500, Count: 5, Type: hongbao.Random}, Expiry: time.Hour, Funding: hongbao.Funded}); err != nil {
		t.Fatal(err)
	}
	day := id.Table(loc)
	if _, err := db.ExecContext(ctx, "DROP TABLE "+day.Details()); err != nil {
		t.Fatal(err)
	}
	owned := map[hongbao.Bucket]bool{id.Bucket(): true}

	snap, err := store.BeginSnapshot(ctx, db, set, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if err := schema.NewEnsurer(db).Ensure(ctx, day); err != nil { // the detail table, after the snapshot
		t.Fatal(err)
	}
	err = snap.Count(ctx, db, owned)
	if !errors.Is(err, store.ErrYounger) {
		t.Fatalf("count with %s younger than its packets: %v, totals %+v; want an error", day.Details(), err, snap.Totals)
	}

	// Opened again, the snapshot sees both tables.
	again, err := store.BeginSnapshot(context.Background(), db, set, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := again.Count(ctx, db, owned); err != nil {
		t.Fatalf("count opened again: %v", err)
	}
	books, err := again.Books(ctx)
	if b, ok := books[id]; err != nil || !ok || b.Total != 500 || b.Funding != hongbao.Funded {
		t.Errorf("books opened again: %v, packet %s: %+v (present %v); want it funded, 500 fen", err, id, b, ok)
	}
}
