package main

import (
	"context"
	"strings"
	"testing"

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
