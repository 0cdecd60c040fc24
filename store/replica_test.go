package store_test

// Detail reads from a SET's replica (Store.WithReplica): served there
// while fresh, from the primary otherwise and whenever the replica lacks
// the packet or fails; the open path never reads it.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store"
)

// waitFor polls cond every 20 ms for up to 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// openers returns the users in a detail read by reader, with their amounts.
func openers(t *testing.T, st *store.Store, id hongbao.PacketID, reader hongbao.UserID) map[hongbao.UserID]int64 {
	t.Helper()
	_, recs, err := st.Detail(context.Background(), id, reader)
	if err != nil {
		t.Fatalf("Packet %s: %v", id, err)
	}
	m := map[hongbao.UserID]int64{}
	for _, r := range recs {
		m[r.User] = r.Amount
	}
	return m
}

func TestReplicaReads(t *testing.T) {
	ctx := context.Background()
	g := dbtest.StartReplicated(t, 0, 1)
	primary, replica := dbtest.Open(t, g.Primary.AppDSN(), 4), dbtest.Open(t, g.Replicas[0].AppDSN(), 4)
	replicaRoot := dbtest.Open(t, g.Replicas[0].DSN, 4)
	if err := schema.EnsureSet(ctx, primary); err != nil {
		t.Fatal(err)
	}
	set, buckets := dbtest.UniqueName("rr"), randomBuckets(1)
	dbtest.Own(t, primary, set, buckets)
	var fresh atomic.Bool
	st := store.New(primary, set, dbtest.Shanghai(t), time.Now, seeded(5)).WithReplica(replica, fresh.Load)

	id := createPacket(t, st, buckets[0], packetSpec{hongbao.Random, 1000, 5}, hongbao.Funded)
	waitFor(t, "the packet on the replica", func() bool {
		var n int
		packets, _ := dbtest.Tables(t, id)
		return replica.QueryRow("SELECT COUNT(*) FROM "+packets+" WHERE id = ?", id).Scan(&n) == nil && n == 1
	})
	// The replica receives but no longer applies: what commits now is on
	// the primary only.
	if _, err := replicaRoot.Exec("STOP SLAVE SQL_THREAD"); err != nil {
		t.Fatal(err)
	}
	first, err := st.Open(ctx, id, 1)
	if err != nil || first.Status != hongbao.Opened {
		t.Fatalf("open: %+v, %v", first, err)
	}

	t.Run("fresh: the replica serves the detail", func(t *testing.T) {
		fresh.Store(true)
		if got := openers(t, st, id, 99); len(got) != 0 {
			t.Errorf("detail %v, want the replica's (no opener yet)", got)
		}
	})
	t.Run("fresh: an opener reads their own share back (the primary)", func(t *testing.T) {
		fresh.Store(true)
		if got := openers(t, st, id, 1); len(got) != 1 || got[1] != first.Amount {
			t.Errorf("detail read by user 1 %v, want their %d", got, first.Amount)
		}
	})
	t.Run("fresh: a send whose funding the replica lacks reads back (the primary)", func(t *testing.T) {
		fresh.Store(true)
		if _, err := replicaRoot.Exec("START SLAVE SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		pend := createPacket(t, st, buckets[0], packetSpec{hongbao.Fixed, 400, 4}, hongbao.Pending)
		waitFor(t, "the pending packet on the replica", func() bool {
			var n int
			packets, _ := dbtest.Tables(t, pend)
			return replica.QueryRow("SELECT COUNT(*) FROM "+packets+" WHERE id = ?", pend).Scan(&n) == nil && n == 1
		})
		if _, err := replicaRoot.Exec("STOP SLAVE SQL_THREAD"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Fund(ctx, pend, hongbao.Funded); err != nil { // the send's last write: on the primary only
			t.Fatal(err)
		}
		p, _, err := st.Detail(ctx, pend, 7)
		if err != nil || p.Funding != hongbao.Funded || p.Total != 400 {
			t.Errorf("Detail %s: %+v, %v; want it funded, 400", pend, p, err)
		}
	})
	t.Run("not fresh: the primary serves it", func(t *testing.T) {
		fresh.Store(false)
		if got := openers(t, st, id, 99); len(got) != 1 || got[1] != first.Amount {
			t.Errorf("detail %v, want user 1 with %d", got, first.Amount)
		}
	})
	t.Run("the open path reads the primary", func(t *testing.T) {
		fresh.Store(true)
		again, err := st.Open(ctx, id, 1)
		if err != nil || again.Status != hongbao.AlreadyOpened || again.Amount != first.Amount {
			t.Errorf("second open %+v, %v; want already_opened %d", again, err, first.Amount)
		}
	})
	t.Run("a packet the replica lacks is read on the primary", func(t *testing.T) {
		fresh.Store(true)
		late := createPacket(t, st, buckets[0], packetSpec{hongbao.Fixed, 300, 3}, hongbao.Funded)
		p, _, err := st.Detail(ctx, late, 99)
		if err != nil || p.Total != 300 {
			t.Errorf("Packet %s: %+v, %v", late, p, err)
		}
	})
	t.Run("a replica that is down: the primary", func(t *testing.T) {
		fresh.Store(true)
		g.Replicas[0].Stop()
		if got := openers(t, st, id, 99); len(got) != 1 || got[1] != first.Amount {
			t.Errorf("detail %v, want user 1 with %d", got, first.Amount)
		}
	})
}
