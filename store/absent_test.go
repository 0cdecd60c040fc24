package store_test

// Store.Absent: the second look that confirms a not-found answer against
// the SET's fence, in one snapshot.

import (
	"context"
	"errors"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
)

func TestAbsent(t *testing.T) {
	db, loc, set, buckets := setup(t, 1)
	st := store.New(db, set, loc, time.Now, seeded(3))
	b := buckets[0]
	funded := createPacket(t, st, b, packetSpec{hongbao.Random, 1000, 5}, hongbao.Funded)
	pending := createPacket(t, st, b, packetSpec{hongbao.Random, 1000, 5}, hongbao.Pending)
	noTable := missingDayTable(t, db)
	if noTable.Bucket() != b {
		dbtest.Own(t, db, set, []hongbao.Bucket{noTable.Bucket()})
	}
	unowned := randomBuckets(1)[0]
	for unowned == b || unowned == noTable.Bucket() {
		unowned = randomBuckets(1)[0]
	}
	for _, tc := range []struct {
		name   string
		id     hongbao.PacketID
		absent bool
		err    error
	}{
		{"a funded packet is there", funded, false, nil},
		{"a pending one is no packet to its openers", pending, true, nil},
		{"no row in an owned bucket", mintID(t, b), true, nil},
		{"no day table in an owned bucket", noTable, true, nil},
		{"a bucket the SET does not own", mintID(t, unowned), false, hongbao.ErrWrongSet},
	} {
		t.Run(tc.name, func(t *testing.T) {
			absent, err := st.Absent(context.Background(), tc.id)
			if absent != tc.absent || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Errorf("Absent(%s) = %v, %v; want %v, %v", tc.id, absent, err, tc.absent, tc.err)
			}
		})
	}
	// The bucket moves away: the same packet is now the new owner's.
	if _, err := db.Exec("DELETE FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", set, int(b)); err != nil {
		t.Fatal(err)
	}
	if absent, err := st.Absent(context.Background(), funded); absent || !errors.Is(err, hongbao.ErrWrongSet) {
		t.Errorf("Absent after the bucket left = %v, %v; want wrong_set", absent, err)
	}
	if absent, err := st.Absent(context.Background(), mintID(t, b)); absent || !errors.Is(err, hongbao.ErrWrongSet) {
		t.Errorf("Absent of a missing packet after the bucket left = %v, %v; want wrong_set", absent, err)
	}
}
