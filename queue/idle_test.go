package queue

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

func TestIdleWorkersExit(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, Config{Size: 8, Batch: 1, Idle: 300 * time.Millisecond}, each(rec.apply), nil)
	for id := range hongbao.PacketID(3) {
		if _, err := m.Submit(context.Background(), id+1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.Stats(); got.Packets != 3 || got.Queued != 0 {
		t.Errorf("Stats() after three opens = %+v, want 3 packets, 0 queued", got)
	}
	waitFor(t, "idle workers to exit", func() bool { return m.Stats().Packets == 0 })
	// A retired packet gets a fresh worker on its next open.
	if res, err := m.Submit(context.Background(), 1, 2); err != nil || res.User != 2 {
		t.Fatalf("open after retirement: %+v, %v", res, err)
	}
	if got := m.Stats().Packets; got != 1 {
		t.Errorf("Stats().Packets = %d after a new open, want 1", got)
	}
	waitFor(t, "idle worker to exit again", func() bool { return m.Stats().Packets == 0 })
}

// TestBusyWorkerDoesNotRetire: a packet that keeps receiving opens within
// Idle keeps one worker, and none of its opens is lost.
func TestBusyWorkerDoesNotRetire(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, Config{Size: 8, Batch: 1, Idle: 30 * time.Millisecond}, each(rec.apply), nil)
	for u := range hongbao.UserID(40) {
		if _, err := m.Submit(context.Background(), 9, u+1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(u%3) * 10 * time.Millisecond)
	}
	if got := rec.applied(9); !slices.Equal(got, userRange(1, 40)) {
		t.Errorf("applied %v", got)
	}
	if n := rec.overlaps.Load(); n != 0 {
		t.Errorf("%d overlapping applies across worker retirements", n)
	}
}

// TestTinyIdleLosesNothing: with an Idle of 1ns the idle timer is ready at
// nearly every select, racing the queued opens and the retirement of the
// worker against new opens. No open may be lost or applied twice, and no two
// workers of one packet may overlap.
func TestTinyIdleLosesNothing(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, Config{Size: 1000, Batch: 3, Idle: time.Nanosecond}, each(rec.apply), nil)
	const clients, rounds = 16, 40
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				u := hongbao.UserID(c*rounds + r + 1)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, err := m.Submit(ctx, 42, u)
				cancel()
				if err != nil || res.User != u {
					t.Errorf("Submit(user %d) = %+v, %v", u, res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got := rec.applied(42)
	slices.Sort(got)
	if !slices.Equal(got, userRange(1, clients*rounds)) {
		t.Errorf("applied %d opens, want each of %d exactly once", len(got), clients*rounds)
	}
	if n := rec.overlaps.Load(); n != 0 {
		t.Errorf("%d overlapping applies of one packet", n)
	}
	waitFor(t, "workers to retire", func() bool { return m.Stats() == Stats{} })
}
