package store_test

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// seeded returns a draw source that replays the same sequence for a seed.
func seeded(seed uint64) func(int64) int64 {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return r.Int64N
}

// TestGroupOpenMatchesOneAtATime: the same seeded draws and the same
// arrival order give exactly the same outcomes (statuses, amounts, errors)
// whether opens are applied one per transaction (K=1) or 32 per
// transaction (K=32), including a user twice in one batch and sold-out in
// the middle of a batch; and the invariants hold for both.
func TestGroupOpenMatchesOneAtATime(t *testing.T) {
	ctx := context.Background()
	db := dbtest.DB(t, "a", 8)
	set := "k" + time.Now().Format("150405.000000")
	if err := fence.Own(ctx, db, set, 1, fence.AllBuckets()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		typ          hongbao.Type
		total        int64
		count, users int
	}{
		{hongbao.Random, 20000, 100, 150},
		{hongbao.Random, 100, 100, 130},
		{hongbao.Fixed, 5000, 50, 90},
		{hongbao.Random, 777, 7, 40},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			arrivals := arrivalsOf(seed, tc.users)
			k1 := openAll(t, db, set, seed, tc.typ, tc.total, tc.count, arrivals, 1)
			k32 := openAll(t, db, set, seed, tc.typ, tc.total, tc.count, arrivals, 32)
			if !slices.Equal(k1, k32) {
				t.Fatalf("%s %d/%d seed %d: K=1 and K=32 differ:\nK=1  %v\nK=32 %v", tc.typ, tc.total, tc.count, seed, k1, k32)
			}
		}
	}
}

// arrivalsOf is a seeded arrival order of n users, some arriving twice.
func arrivalsOf(seed uint64, n int) []hongbao.UserID {
	r := rand.New(rand.NewPCG(seed, 7))
	var us []hongbao.UserID
	for i := range n {
		u := hongbao.UserID(1000 + i)
		us = append(us, u)
		if r.IntN(5) == 0 {
			us = append(us, u) // the same user again, often in the same batch
		}
	}
	r.Shuffle(len(us), func(i, j int) { us[i], us[j] = us[j], us[i] })
	return us
}

// openAll creates a packet and applies arrivals k at a time; it returns a
// printable outcome per arrival and checks the packet's invariants.
func openAll(t *testing.T, db storeDB, set string, seed uint64, typ hongbao.Type, total int64, count int, arrivals []hongbao.UserID, k int) []string {
	t.Helper()
	ctx := context.Background()
	loc, _ := time.LoadLocation("Asia/Shanghai")
	st := store.New(db, set, loc, time.Now, seeded(seed))
	id, err := hongbao.NewPacketID(time.Now(), hongbao.Bucket(rand.IntN(hongbao.Buckets)), rand.IntN(4096))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = st.Create(ctx, store.NewPacket{ID: id, Sender: 1, Req: hongbao.SendRequest{Total: total, Count: count, Type: typ},
		Expiry: time.Hour, Funding: hongbao.Funded})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := 0; i < len(arrivals); i += k {
		b, err := st.OpenBatch(ctx, id, arrivals[i:min(i+k, len(arrivals))])
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range b.Outcomes {
			if o.Err != nil {
				out = append(out, hongbao.Code(o.Err))
			} else {
				out = append(out, o.Result.User.String()+":"+o.Result.Status+":"+itoa(o.Result.Amount))
			}
		}
	}
	p, recs, err := st.Packet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	seen := map[hongbao.UserID]bool{}
	for _, r := range recs {
		if r.Amount < 1 || seen[r.User] {
			t.Fatalf("K=%d: bad record %+v", k, r)
		}
		seen[r.User] = true
		sum += r.Amount
	}
	if sum+p.RemainingAmount != p.Total || len(recs)+p.RemainingCount != p.Count {
		t.Fatalf("K=%d: %d+%d != %d or %d+%d != %d", k, sum, p.RemainingAmount, p.Total, len(recs), p.RemainingCount, p.Count)
	}
	return out
}

type storeDB = *sql.DB

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
