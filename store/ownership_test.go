package store_test

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store"
)

// TestOwnershipFiltersSettling: with an Ownership (the topology's, in the
// settler and the archiver), Due and Owns act only on the fence buckets it
// trusts: a bucket the fence holds but the topology gives another SET (a
// dead mover's claim, a stale copy) is never closed, funded nor archived
// here; the Ownership sees every fence row with its version; its error is
// the caller's, never a silent "all" or "none".
func TestOwnershipFiltersSettling(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := setup(t, 2)
	st := store.New(db, set, loc, time.Now, rand.Int64N)
	sp := packetSpec{typ: hongbao.Fixed, total: 300, count: 3}
	mine, claimed := createPacket(t, st, buckets[0], sp, hongbao.Funded), createPacket(t, st, buckets[1], sp, hongbao.Funded)
	later := time.Now().Add(2 * time.Hour)
	if got := due(ctx, t, st, "expiry", later); !slices.Contains(got, mine) || !slices.Contains(got, claimed) {
		t.Fatalf("fence alone: due %v, want %s and %s", got, mine, claimed)
	}

	var seen map[hongbao.Bucket]int64
	st.WithOwnership(func(_ context.Context, fence map[hongbao.Bucket]int64) (map[hongbao.Bucket]bool, error) {
		seen = fence
		return map[hongbao.Bucket]bool{buckets[0]: true}, nil
	})
	// Other tests' packets may share these buckets (one MariaDB): look at ours.
	for _, id := range due(ctx, t, st, "expiry", later) {
		if id.Bucket() != buckets[0] {
			t.Errorf("with the topology's ownership: %s of bucket %d is due, want only bucket %d's (bucket %d is only claimed)",
				id, id.Bucket(), buckets[0], buckets[1])
		}
	}
	if got := due(ctx, t, st, "expiry", later); !slices.Contains(got, mine) {
		t.Errorf("with the topology's ownership: due %v, want %s among them", got, mine)
	}
	if want := map[hongbao.Bucket]int64{buckets[0]: 1, buckets[1]: 1}; !maps.Equal(seen, want) {
		t.Errorf("the Ownership was shown the fence %v, want %v", seen, want)
	}
	for b, want := range map[hongbao.Bucket]bool{buckets[0]: true, buckets[1]: false} {
		if got, err := st.Owns(ctx, b); err != nil || got != want {
			t.Errorf("Owns(%d) = %v, %v; want %v", b, got, err, want)
		}
	}
	days, err := st.Days(ctx) // what the archiver archives
	if err != nil {
		t.Fatal(err)
	}
	var in []hongbao.Bucket
	for _, d := range days {
		in = append(in, d.Table.Bucket)
	}
	if !slices.Contains(in, buckets[0]) || slices.Contains(in, buckets[1]) {
		t.Errorf("the archiver's days are of buckets %v, want %d's and never %d's", in, buckets[0], buckets[1])
	}

	boom := errors.New("meta database unreachable")
	st.WithOwnership(func(context.Context, map[hongbao.Bucket]int64) (map[hongbao.Bucket]bool, error) { return nil, boom })
	if ids, err := st.Due(ctx, "expiry", later, 100); !errors.Is(err, boom) || ids != nil {
		t.Errorf("ownership failing: Due = %v, %v; want %v", ids, err, boom)
	}
	if _, err := st.Owns(ctx, buckets[0]); !errors.Is(err, boom) {
		t.Errorf("ownership failing: Owns err %v, want %v", err, boom)
	}
}
