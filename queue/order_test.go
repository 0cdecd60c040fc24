package queue

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

func TestFIFO(t *testing.T) {
	for _, batch := range []int{1, 4} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			rec := newRecorder()
			rec.gate = make(chan struct{})
			m := newManager(t, Config{Size: 100, Batch: batch}, each(rec.apply), nil)
			const id = 7
			out := make(chan result, 50)
			// User 1 is taken at once and blocks in apply...
			submitAsync(context.Background(), m, id, 1, out)
			if c := rec.waitStarted(t); c.id != id || !slices.Equal(c.users, []hongbao.UserID{1}) {
				t.Fatalf("first apply = %+v", c)
			}
			// ...while users 2..30 queue up behind it in a known order.
			order := []hongbao.UserID{2, 30, 3, 29, 4, 28, 5, 27, 6, 26, 7, 25, 8, 24, 9, 23, 10, 22, 11, 21, 12, 20, 13, 19, 14, 18, 15, 17, 16}
			submitInOrder(t, m, id, order, 1, out)
			close(rec.gate)
			got := collect(t, out, 30)
			for u, r := range got {
				if r.err != nil || r.res.User != u {
					t.Errorf("user %d: %+v, %v", u, r.res, r.err)
				}
			}
			want := append([]hongbao.UserID{1}, order...)
			if applied := rec.applied(id); !slices.Equal(applied, want) {
				t.Errorf("applied in order %v, want arrival order %v", applied, want)
			}
		})
	}
}

// TestOnePacketNeverConcurrent: many clients open a few packets at once;
// every open is applied exactly once, batches never exceed Batch, and two
// batches of one packet never overlap.
func TestOnePacketNeverConcurrent(t *testing.T) {
	rec := newRecorder()
	rec.delay = 200 * time.Microsecond
	m := newManager(t, Config{Size: 10000, Batch: 4}, each(rec.apply), nil)
	const packets, perPacket = 4, 150
	out := make(chan result, packets*perPacket)
	var start sync.WaitGroup
	start.Add(1)
	for p := range packets {
		for u := range perPacket {
			go func() {
				start.Wait()
				id, user := hongbao.PacketID(100+p), hongbao.UserID(u+1)
				res, err := m.Submit(context.Background(), id, user)
				if err != nil || res.User != user || res.Amount != share(id, user) || res.Status != hongbao.Opened {
					t.Errorf("Submit(%d, %d) = %+v, %v", id, user, res, err)
				}
				out <- result{}
			}()
		}
	}
	start.Done()
	for range packets * perPacket {
		select {
		case <-out:
		case <-time.After(20 * time.Second):
			t.Fatal("opens not answered")
		}
	}
	if n := rec.overlaps.Load(); n != 0 {
		t.Errorf("%d applies overlapped another apply of the same packet", n)
	}
	for _, s := range rec.sizes() {
		if s < 1 || s > 4 {
			t.Errorf("batch of %d, want 1..4", s)
		}
	}
	for p := range packets {
		id := hongbao.PacketID(100 + p)
		got := rec.applied(id)
		slices.Sort(got)
		if !slices.Equal(got, userRange(1, perPacket)) {
			t.Errorf("packet %d: applied %d opens %v, want users 1..%d once each", id, len(got), got, perPacket)
		}
	}
	waitFor(t, "queue to empty", func() bool { return m.Stats().Queued == 0 })
}

// TestPacketsRunInParallel: one packet's slow transaction does not hold up
// another packet.
func TestPacketsRunInParallel(t *testing.T) {
	rec := newRecorder()
	release := make(chan struct{})
	m := newManager(t, Config{Size: 8, Batch: 1}, each(func(ctx context.Context, id hongbao.PacketID, users []hongbao.UserID) ([]hongbao.Outcome, error) {
		if id == 1 {
			<-release
		}
		return rec.apply(ctx, id, users)
	}), nil)
	out := make(chan result, 2)
	submitAsync(context.Background(), m, 1, 1, out)
	waitFor(t, "packet 1 to be in flight", func() bool { return m.Stats().Queued == 1 })
	if _, err := m.Submit(context.Background(), 2, 1); err != nil {
		t.Fatalf("packet 2 while packet 1 is stuck: %v", err)
	}
	close(release)
	if r := collect(t, out, 1)[1]; r.err != nil {
		t.Fatalf("packet 1: %v", r.err)
	}
	if got := m.Stats().Packets; got != 2 {
		t.Errorf("Stats().Packets = %d, want 2", got)
	}
}
