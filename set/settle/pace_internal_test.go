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
