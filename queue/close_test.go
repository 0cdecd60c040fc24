package queue

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
)

func TestCloseDrains(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	m := New(Config{Size: 100, Batch: 3}, each(rec.apply), nil, zap.NewNop())
	const packets, per = 3, 10
	out := make(chan result, packets*per)
	for p := range packets {
		// Users are distinct across packets: p*100+1 .. p*100+per.
		id, first := hongbao.PacketID(p+1), p*100+1
		submitAsync(context.Background(), m, id, hongbao.UserID(first), out)
		rec.waitStarted(t)
		submitInOrder(t, m, id, userRange(first+1, first+per-1), int64(p*per+1), out)
	}
	drainOnClose(t, m, func() { close(rec.gate) })
	got := collect(t, out, packets*per)
	for u, r := range got {
		if r.err != nil {
			t.Errorf("user %d lost in Close: %v", u, r.err)
		}
	}
	for p := range packets {
		if applied := rec.applied(hongbao.PacketID(p + 1)); !slices.Equal(applied, userRange(p*100+1, p*100+per)) {
			t.Errorf("packet %d applied %v", p+1, applied)
		}
	}
	if s := m.Stats(); s != (Stats{}) {
		t.Errorf("Stats() after Close = %+v, want zero", s)
	}
	if _, err := m.Submit(context.Background(), 1, 1000); !errors.Is(err, hongbao.ErrUnavailable) {
		t.Errorf("Submit after Close = %v, want ErrUnavailable", err)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestCloseTimesOut(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	m := New(Config{Size: 8, Batch: 1}, each(rec.apply), nil, zap.NewNop())
	out := make(chan result, 1)
	submitAsync(context.Background(), m, 1, 1, out)
	rec.waitStarted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := m.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close with a stuck apply = %v, want DeadlineExceeded", err)
	}
	close(rec.gate)
	if r := collect(t, out, 1)[1]; r.err != nil {
		t.Errorf("open after a timed-out Close: %v", r.err)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Errorf("Close after the apply finished: %v", err)
	}
}
