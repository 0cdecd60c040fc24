package sqldb

import (
	"errors"
	"testing"
	"time"
)

func TestChoose(t *testing.T) {
	down := errors.New("down")
	tests := []struct {
		name   string
		probes []Probe
		cur    int
		seen   int64
		want   int
	}{
		{"none answers", []Probe{{Err: down}, {Err: down}}, 0, 0, -1},
		{"no member writable (primary gone, no failover yet)", []Probe{{Err: down}, {Epoch: 0}}, 0, 0, -1},
		{"the configured primary before any failover", []Probe{{Writable: true}, {}}, -1, 0, 0},
		{"the promoted replica", []Probe{{Err: down}, {Writable: true, Epoch: 5}}, 0, 0, 1},
		{"a resumed old primary, never fenced, loses to the new one", []Probe{{Writable: true, Epoch: 0}, {Writable: true, Epoch: 5}}, 0, 0, 1},
		{"nor is it chosen once the new one is unreachable", []Probe{{Writable: true, Epoch: 0}, {Err: down}}, 1, 5, -1},
		{"a fenced old primary is read-only", []Probe{{Epoch: 7}, {Writable: true, Epoch: 5}}, 0, 5, 1},
		{"the current member among equals", []Probe{{Writable: true, Epoch: 5}, {Writable: true, Epoch: 5}}, 1, 5, 1},
		{"the first among equals when none is current", []Probe{{Writable: true, Epoch: 5}, {Writable: true, Epoch: 5}}, -1, 0, 0},
		{"a later failover back to the first member", []Probe{{Writable: true, Epoch: 9}, {Epoch: 5}}, 1, 5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Choose(tt.probes, tt.cur, tt.seen); got != tt.want {
				t.Errorf("Choose(%+v, cur %d, seen %d) = %d, want %d", tt.probes, tt.cur, tt.seen, got, tt.want)
			}
		})
	}
}

// TestGroupProbesRounds: a follower that read round n is woken by the
// next round, and at once when that round was published before it asked
// (it skips no round's turn); Close ends the rounds.
func TestGroupProbesRounds(t *testing.T) {
	g, err := NewGroupProbes("u:p@tcp(127.0.0.1:1)/", nil) // no members: empty rounds
	if err != nil {
		t.Fatal(err)
	}
	<-g.newer(0)
	_, first := g.latest()
	if first < 1 {
		t.Fatalf("round %d after the first was published", first)
	}
	select {
	case <-g.newer(first - 1):
	default:
		t.Fatalf("a follower that read round %d waits for round %d, which is out", first-1, first)
	}
	select {
	case <-g.newer(first):
		if _, now := g.latest(); now <= first {
			t.Fatalf("woken for round %d, still at %d", first, now)
		}
	case <-time.After(10 * followEvery):
		t.Fatalf("no round after %d within %s", first, 10*followEvery)
	}
	g.Close()
	select {
	case <-g.stopped:
	default:
		t.Fatal("Close returned with the rounds still running")
	}
}
