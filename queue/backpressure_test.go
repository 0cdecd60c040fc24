package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

func TestFullQueueIsBusy(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	m := newManager(t, Config{Size: 2, Batch: 1}, each(rec.apply), nil)
	out := make(chan result, 3)
	submitAsync(context.Background(), m, 5, 1, out)
	rec.waitStarted(t) // the worker holds user 1; the queue is empty
	submitInOrder(t, m, 5, []hongbao.UserID{2, 3}, 1, out)

	start := time.Now()
	_, err := m.Submit(context.Background(), 5, 4)
	if !errors.Is(err, hongbao.ErrBusy) {
		t.Fatalf("Submit to a full queue = %v, want ErrBusy", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("busy answer took %s, want it at once", d)
	}
	if hongbao.Code(err) != "busy" {
		t.Errorf("Code = %q, want busy", hongbao.Code(err))
	}
	// Another packet is not affected by this one being full.
	rec2 := make(chan result, 1)
	submitAsync(context.Background(), m, 6, 1, rec2)
	close(rec.gate)
	collect(t, rec2, 1)
	got := collect(t, out, 3)
	for u, r := range got {
		if r.err != nil {
			t.Errorf("user %d: %v", u, r.err)
		}
	}
	if applied := rec.applied(5); !slices.Equal(applied, []hongbao.UserID{1, 2, 3}) {
		t.Errorf("applied %v, want [1 2 3]: the busy open must not be applied", applied)
	}
}

type fakeSlots struct {
	ok  bool
	err error

	mu       sync.Mutex
	acquired int
	released []string
	limits   []int
	holds    []time.Duration
}

func (s *fakeSlots) AcquireSlot(id hongbao.PacketID, limit int, hold time.Duration) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acquired++
	s.limits = append(s.limits, limit)
	s.holds = append(s.holds, hold)
	if s.err != nil {
		return "", false, s.err
	}
	if !s.ok {
		return "", false, nil
	}
	return fmt.Sprintf("tok-%d-%d", id, s.acquired), true, nil
}

func (s *fakeSlots) ReleaseSlot(id hongbao.PacketID, token string, hold time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = append(s.released, token)
}

func TestSlots(t *testing.T) {
	cfg := Config{Size: 8, Batch: 1, SlotCap: 3, TxTimeout: 2 * time.Second}
	t.Run("granted", func(t *testing.T) {
		rec := newRecorder()
		slots := &fakeSlots{ok: true}
		m := newManager(t, cfg, each(rec.apply), slots)
		for u := range hongbao.UserID(2) {
			if _, err := m.Submit(context.Background(), 12, u+1); err != nil {
				t.Fatal(err)
			}
		}
		slots.mu.Lock()
		if slots.acquired != 1 || len(slots.released) != 0 {
			t.Errorf("acquired %d, released %v; want one lease kept by the live worker", slots.acquired, slots.released)
		}
		if !slices.Equal(slots.limits, []int{3}) || !slices.Equal(slots.holds, []time.Duration{4 * time.Second}) {
			t.Errorf("AcquireSlot limits %v holds %v, want SlotCap 3 and 2 x TxTimeout", slots.limits, slots.holds)
		}
		slots.mu.Unlock()
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		slots.mu.Lock()
		defer slots.mu.Unlock()
		if !slices.Equal(slots.released, []string{"tok-12-1"}) {
			t.Errorf("released %v after Close, want the lease back with its token", slots.released)
		}
	})
	t.Run("lease taken again before it lapses", func(t *testing.T) {
		rec := newRecorder()
		slots := &fakeSlots{ok: true}
		short := Config{Size: 8, Batch: 1, SlotCap: 3, TxTimeout: 100 * time.Millisecond, Idle: time.Minute}
		m := newManager(t, short, each(rec.apply), slots)
		if _, err := m.Submit(context.Background(), 12, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(120 * time.Millisecond) // less than one TxTimeout left of the 200 ms lease
		if _, err := m.Submit(context.Background(), 12, 2); err != nil {
			t.Fatal(err)
		}
		slots.mu.Lock()
		defer slots.mu.Unlock()
		if slots.acquired != 2 || !slices.Equal(slots.released, []string{"tok-12-1"}) {
			t.Errorf("acquired %d, released %v; want the old lease given back and a new one taken", slots.acquired, slots.released)
		}
	})
	t.Run("cap reached", func(t *testing.T) {
		rec := newRecorder()
		slots := &fakeSlots{ok: false}
		m := newManager(t, cfg, each(rec.apply), slots)
		if _, err := m.Submit(context.Background(), 12, 1); !errors.Is(err, hongbao.ErrBusy) {
			t.Errorf("Submit with the cap reached = %v, want ErrBusy", err)
		}
		if n := len(rec.snapshot()); n != 0 {
			t.Errorf("%d applies, want none while the cap is reached", n)
		}
		if len(slots.released) != 0 {
			t.Errorf("released %v, want nothing: no slot was taken", slots.released)
		}
	})
	t.Run("cap unreachable", func(t *testing.T) {
		rec := newRecorder()
		slots := &fakeSlots{err: errors.New("memcached: connection refused")}
		m := newManager(t, cfg, each(rec.apply), slots)
		res, err := m.Submit(context.Background(), 12, 1)
		if err != nil || res.Status != hongbao.Opened {
			t.Errorf("Submit with memcached down = %+v, %v; want the open through", res, err)
		}
		if n := len(rec.snapshot()); n != 1 {
			t.Errorf("%d applies, want 1", n)
		}
		if len(slots.released) != 0 {
			t.Errorf("released %v, want nothing", slots.released)
		}
	})
}
