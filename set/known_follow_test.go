package set

import (
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// TestKnownFollowsTheSETsBuckets: when the topology shows a bucket leaving
// the SET, the packets known of it are forgotten (the others kept, the
// bookkeeping exact), nothing is learnt of it while it is away (a
// transaction that committed just before it left), and once it is back it
// starts from nothing: the next transaction reads MySQL and teaches again.
func TestKnownFollowsTheSETsBuckets(t *testing.T) {
	id := func(b hongbao.Bucket, seq int) hongbao.PacketID {
		id, err := hongbao.NewPacketID(t0.Add(-time.Minute), b, seq)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	gone, stays := id(3, 1), id(4, 1)
	gone2 := id(3, 2)
	k := newKnown(1000)
	k.learn(gone, batch(gone, 5, map[hongbao.UserID]int64{11: 37}), t0)
	k.learn(gone2, batch(gone2, 5, map[hongbao.UserID]int64{}), t0)
	k.learn(stays, batch(stays, 5, map[hongbao.UserID]int64{12: 40, 13: 2}), t0)

	all := func(hongbao.Bucket) bool { return true }
	k.follow(all) // no change: nothing forgotten
	if got := checkKnown(t, k); !slices.Equal(got, []hongbao.PacketID{gone, gone2, stays}) {
		t.Fatalf("known after a topology change that kept every bucket: %v", got)
	}
	k.follow(func(b hongbao.Bucket) bool { return b != 3 })
	if got := checkKnown(t, k); !slices.Equal(got, []hongbao.PacketID{stays}) || k.held != 2+knownCost {
		t.Fatalf("known after bucket 3 left: %v holding %d, want only %s holding %d", got, k.held, stays, 2+knownCost)
	}
	if _, answered, live := k.answer(gone, 11, t0); answered || live {
		t.Errorf("a packet of the bucket that left still answers: answered %v, live %v", answered, live)
	}
	k.learn(gone, batch(gone, 5, map[hongbao.UserID]int64{11: 37, 14: 5}), t0)
	if k.get(gone, t0) != nil {
		t.Errorf("learnt a packet of a bucket away from the SET")
	}
	k.follow(all) // bucket 3 is back
	if k.get(gone, t0) != nil || k.get(gone2, t0) != nil {
		t.Errorf("bucket 3 came back with what was known before it left")
	}
	k.learn(gone, batch(gone, 5, map[hongbao.UserID]int64{11: 37, 14: 5, 15: 9}), t0)
	if kn := k.get(gone, t0); kn == nil || len(kn.Openers) != 3 {
		t.Errorf("a packet of the bucket back is not learnt again: %+v", kn)
	}
	if got := checkKnown(t, k); !slices.Equal(got, []hongbao.PacketID{stays, gone}) {
		t.Errorf("known at the end: %v, want %s then %s", got, stays, gone)
	}
}
