//go:build !race

package queue

import (
	"context"
	"runtime"
	"slices"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
)

// TestGatherOneBatch: opens of one packet that goroutines submit together
// (as a router's batch reaches a server: a goroutine per sub-request)
// make one batch, not the first alone and the rest after it. With one P,
// as the cluster runs its servers, the first submit's send makes the
// worker the next goroutine to run; without gather it took one open.
// Built without -race (the race detector's random yields would hide what
// it checks): make test runs it once more without -race.
func TestGatherOneBatch(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	rec := newRecorder()
	m := newManager(t, Config{Size: 100, Batch: 64}, each(rec.apply), nil)
	for round := range 3 {
		id := hongbao.PacketID(10 + round)
		out := make(chan result, 25)
		start := make(chan struct{})
		for _, u := range userRange(1, 25) {
			go func() {
				<-start
				res, err := m.Submit(context.Background(), id, u)
				out <- result{u, res, err}
			}()
		}
		close(start)
		got := collect(t, out, 25)
		for u, r := range got {
			if r.err != nil || r.res.Amount != share(id, u) {
				t.Fatalf("round %d, user %d: %+v %v", round, u, r.res, r.err)
			}
		}
		var sizes []int
		for _, c := range rec.snapshot() {
			if c.id == id {
				sizes = append(sizes, len(c.users))
			}
		}
		if !slices.Equal(sizes, []int{25}) {
			t.Errorf("round %d: batches %v, want the 25 opens in one", round, sizes)
		}
	}
}
