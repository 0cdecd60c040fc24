package migrate_test

import (
	"context"
	"sync"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestPassRemembersWhatItCopied: a send's pending mark written after a
// pass digested the source and before it copied the chunk reaches the
// target with the copy; funded (the mark deleted) before the freeze, the
// chunk is back to what the pass's digest saw. Delta must still copy it:
// what a pass remembers is what it copied, not what it digested, or the
// mark stays on the target and the move fails its verify (seen under load
// in TestVerifyNoOrphansWhileMoving: "hb_set.pending: source 0 rows,
// target 1 rows").
func TestPassRemembersWhatItCopied(t *testing.T) {
	p := startPair(t)
	ctx := context.Background()
	fund := func(id hongbao.PacketID) {
		t.Helper()
		if _, err := p.src.Fund(ctx, id, hongbao.Funded); err != nil {
			t.Fatal(err)
		}
	}
	a, b := p.sendPending(t), p.sendPending(t)
	m := p.move(1000) // one chunk per table
	mustPass(t, m)
	fund(a) // the pending marks' chunk differs at the next pass
	var once sync.Once
	var late hongbao.PacketID
	var lateErr error
	m.SetBeforeCopy(func(table string) { // on a copy's goroutine
		if table == "hb_set.pending" {
			once.Do(func() { late, lateErr = p.newPending() }) // after the digests, before the copy's read
		}
	})
	mustPass(t, m)
	m.SetBeforeCopy(nil)
	if lateErr != nil {
		t.Fatal(lateErr)
	}
	if late == 0 {
		t.Fatal("the pass copied no pending mark: the test did not reach its window")
	}
	if n := pendingOf(t, p, late); n != 1 {
		t.Fatalf("the late send's mark on the target after the pass: %d rows, want 1 (the copy read it)", n)
	}
	fund(late) // gone from the source before the freeze
	if _, err := m.Delta(ctx); err != nil {
		t.Fatal(err)
	}
	if bad := verify(t, m); len(bad) != 0 {
		t.Errorf("verify after Delta: %v", bad)
	}
	for _, c := range []struct {
		id   hongbao.PacketID
		want int
	}{{a, 0}, {b, 1}, {late, 0}} {
		if n := pendingOf(t, p, c.id); n != c.want {
			t.Errorf("pending mark of %s on the target: %d rows, want %d", c.id, n, c.want)
		}
	}
}

// pendingOf counts id's pending marks on the target.
func pendingOf(t *testing.T, p *pair, id hongbao.PacketID) int {
	t.Helper()
	return dbtest.Count(t, p.to, "SELECT COUNT(*) FROM hb_set.pending WHERE packet_id = ?", id)
}
