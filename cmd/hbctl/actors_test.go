package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/dbtest"
)

// TestPublishChecksPrimary: two failover actors read SET s's group while
// its primary is P; one publishes R1. The other's publish of R2 must fail
// (compare-and-set on the primary it started from), naming what is
// published, and leave R1 published.
func TestPublishChecksPrimary(t *testing.T) {
	ctx := context.Background()
	name := dbtest.UniqueName("s")
	p, r1, r2 := fakeDSN(1001), fakeDSN(1002), fakeDSN(1003)
	meta := testMeta(t, fakeSet(name, p, r1, r2))
	first, err := setGroup(ctx, meta, name)
	if err != nil {
		t.Fatal(err)
	}
	second, err := setGroup(ctx, meta, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.publish(ctx, r1, []string{r2, p}); err != nil {
		t.Fatal(err)
	}
	_, err = second.publish(ctx, r2, []string{r1, p})
	if err == nil {
		t.Fatalf("a second failover from %s published %s over %s: two primaries published in turn", addrOf(p), addrOf(r2), addrOf(r1))
	}
	if !strings.Contains(err.Error(), addrOf(r1)) || !strings.Contains(err.Error(), addrOf(p)) {
		t.Errorf("the refusal does not say what is published (%s) and what the failover started from (%s): %v", addrOf(r1), addrOf(p), err)
	}
	if got := metaPrimary(t, meta, name); got != r1 {
		t.Errorf("SET %s's primary is %s; want %s (the first publish)", name, got, r1)
	}
}

// TestCoreStampChecksEpoch: two core failovers start from epoch E; the one
// that read the members first promotes R1 and stamps its epoch. The
// other, stamping R2 later, must not overtake it with a higher epoch
// (every process would move to R2, away from a primary that may have
// acknowledged commits): its stamp is refused, naming R1's epoch.
func TestCoreStampChecksEpoch(t *testing.T) {
	ctx := context.Background()
	ms := startMariaDBs(t, 3)
	var dsns []string
	for _, m := range ms {
		dsns = append(dsns, m.DSN)
	}
	const e = 1000
	for _, m := range ms {
		if err := schema.StampEpoch(ctx, dbtest.Open(t, m.DSN, 1), e, addrOf(ms[0].DSN)); err != nil {
			t.Fatal(err)
		}
	}
	out := &syncBuffer{}
	f := &failover{e: &env{stdout: out, stderr: out}, cfg: configs.Replication{AdminUser: "root"}}
	members := coreMembers{dsns: dsns, primary: 0, epoch: e}
	first := coreGroup(members, nil, f.epochOf)
	time.Sleep(5 * time.Millisecond) // the second's epoch (the clock in ms) is above the first's
	second := coreGroup(members, nil, f.epochOf)
	if err := first.stamp(ctx, dbtest.Open(t, ms[1].DSN, 1), ms[1].DSN); err != nil {
		t.Fatal(err)
	}
	r1, _, err := schema.Epoch(ctx, dbtest.Open(t, ms[1].DSN, 1))
	if err != nil {
		t.Fatal(err)
	}
	err = second.stamp(ctx, dbtest.Open(t, ms[2].DSN, 1), ms[2].DSN)
	r2, _, _ := schema.Epoch(ctx, dbtest.Open(t, ms[2].DSN, 1))
	if err == nil {
		t.Fatalf("the second core failover stamped epoch %d on %s over epoch %d on %s: two promotions from epoch %d", r2, addrOf(ms[2].DSN), r1, addrOf(ms[1].DSN), e)
	}
	if r2 != e || !strings.Contains(err.Error(), strconv.FormatInt(r1, 10)) {
		t.Errorf("refused (%v) with epoch %d on %s; want epoch %d left and the refusal naming epoch %d", err, r2, addrOf(ms[2].DSN), e, r1)
	}
}

// startMariaDBs starts n private MariaDBs at once.
func startMariaDBs(t *testing.T, n int) []*dbtest.MariaDB {
	t.Helper()
	ms := make([]*dbtest.MariaDB, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range ms {
		wg.Go(func() { ms[i], errs[i] = dbtest.Launch() })
	}
	wg.Wait()
	for _, m := range ms {
		if m != nil {
			t.Cleanup(m.Remove)
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return ms
}
