package admin

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// An armed Overrun that is not disarmed in time exits 1, logging the
// stacks of the goroutines (the hung one among them); one disarmed in time
// does nothing.
func TestOverrun(t *testing.T) {
	// The disarmed one has 2 s to reach Disarm, the next line (a loaded
	// machine may stall a goroutine for much of a second), and is watched
	// past its limit; the hung one has all a loaded machine may take to
	// log and exit.
	tests := []struct {
		name   string
		limit  time.Duration
		disarm bool
		exits  bool
		wait   time.Duration
	}{
		{"stopped in time", 2 * time.Second, true, false, 2500 * time.Millisecond},
		{"hung", 50 * time.Millisecond, false, true, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.InfoLevel)
			exited := make(chan int, 1)
			o := &Overrun{Exit: func(code int) { exited <- code }}
			o.Arm(tt.limit, zap.New(core))
			if tt.disarm {
				o.Disarm()
			}
			select {
			case code := <-exited:
				if !tt.exits || code != 1 {
					t.Fatalf("exit(%d), want exit: %v", code, tt.exits)
				}
				entries := logs.FilterMessage("shutdown overran: exiting").All()
				if len(entries) != 1 || !strings.Contains(entries[0].ContextMap()["goroutines"].(string), "TestOverrun") {
					t.Errorf("logged %+v, want the overrun with the goroutines' stacks", logs.All())
				}
			case <-time.After(tt.wait):
				if tt.exits {
					t.Fatal("no exit after the limit")
				}
			}
		})
	}
}
