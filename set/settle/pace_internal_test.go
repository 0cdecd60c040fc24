package settle

import (
	"errors"
	"testing"
	"time"
)

// TestPace: the due lists are passed over at once, then at most once per
// DueEvery while passes find nothing, and again at once after a pass
// that found work or failed.
func TestPace(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p := pace{every: time.Second}
	steps := []struct {
		at      int // ms after t0
		wantDue bool
		work    int // what the pass (if due) handled
		err     error
	}{
		{0, true, 0, nil},
		{200, false, 0, nil},
		{999, false, 0, nil},
		{1000, true, 3, nil}, // found work:
		{1200, true, 0, nil}, // looks again at once, then idles
		{1400, false, 0, nil},
		{2200, true, 0, errors.New("x")}, // failed:
		{2400, true, 0, nil},             // retried at once
		{3300, false, 0, nil},
		{3400, true, 0, nil},
	}
	for _, s := range steps {
		got := p.due(at(s.at))
		if got != s.wantDue {
			t.Fatalf("at %d ms: due = %v, want %v", s.at, got, s.wantDue)
		}
		if got {
			p.ran(at(s.at), s.work, s.err)
		}
	}
}

// TestWait: after a round, the settler goes on at once while work may be
// waiting, spaces deliveries of a steady stream to DeliverEvery from the
// round's start, and idles Interval after a round that found nothing or
// failed.
func TestWait(t *testing.T) {
	s := &Settler{Interval: 200 * time.Millisecond, DeliverEvery: 100 * time.Millisecond}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	tests := []struct {
		name string
		r    roundWork
		err  error
		took time.Duration
		want time.Duration
	}{
		{"nothing found", roundWork{}, nil, ms(5), ms(200)},
		{"failed", roundWork{sent: 30}, errors.New("x"), ms(5), ms(200)},
		{"a steady stream", roundWork{sent: 30}, nil, ms(30), ms(70)},
		{"a round as long as the pace", roundWork{sent: 30}, nil, ms(100), 0},
		{"a round longer than the pace", roundWork{sent: 30}, nil, ms(150), 0},
		{"a backlog", roundWork{sent: 2000, full: true}, nil, ms(30), 0},
		{"a backlog behind a kept row", roundWork{sent: 1999, full: true}, nil, ms(30), 0},
		{"a full delivery that failed", roundWork{sent: 1000, full: true}, errors.New("x"), ms(30), ms(200)},
		{"due lists had work", roundWork{due: 3}, nil, ms(30), 0},
		{"due work and credits", roundWork{due: 1, sent: 5}, nil, ms(30), 0},
	}
	for _, tt := range tests {
		if got := s.wait(tt.r, tt.err, tt.took); got != tt.want {
			t.Errorf("%s: wait = %v, want %v", tt.name, got, tt.want)
		}
	}
	s.DeliverEvery = 0 // back to back, as before the pace
	if got := s.wait(roundWork{sent: 30}, nil, ms(30)); got != 0 {
		t.Errorf("DeliverEvery 0: wait = %v, want 0", got)
	}
}
