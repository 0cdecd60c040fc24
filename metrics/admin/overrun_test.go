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
	tests := []struct {
		name   string
		disarm bool
		exits  bool
	}{
		{"stopped in time", true, false},
		{"hung", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.InfoLevel)
			exited := make(chan int, 1)
			o := &Overrun{Exit: func(code int) { exited <- code }}
			o.Arm(50*time.Millisecond, zap.New(core))
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
			case <-time.After(500 * time.Millisecond):
				if tt.exits {
					t.Fatal("no exit after the limit")
				}
			}
		})
	}
}
