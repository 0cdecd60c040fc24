package hongbao

import (
	"reflect"
	"testing"
	"time"
)

func TestStateMeaning(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	p := Packet{Total: 100, Count: 4, RemainingAmount: 30, RemainingCount: 2, ExpiresAt: now.Add(time.Second), Closed: false}
	if got, want := p.State(), (State{RemainingCount: 2, ExpiresAt: now.Add(time.Second)}); !reflect.DeepEqual(got, want) {
		t.Fatalf("State() = %+v, want %+v", got, want)
	}
	tests := []struct {
		name string
		s    State
		want Status
	}{
		{"shares left, not expired", State{RemainingCount: 2, ExpiresAt: now.Add(time.Second)}, Active},
		{"no share left", State{RemainingCount: 0, ExpiresAt: now.Add(time.Second)}, SoldOut},
		{"expiry reached", State{RemainingCount: 2, ExpiresAt: now}, Expired},
		{"closed by the settler", State{RemainingCount: 2, ExpiresAt: now.Add(time.Hour), Closed: true}, Expired},
		{"sold out wins over expired", State{RemainingCount: 0, ExpiresAt: now.Add(-time.Hour), Closed: true}, SoldOut},
	}
	for _, tt := range tests {
		if got := tt.s.Status(now); got != tt.want {
			t.Errorf("%s: Status = %s, want %s", tt.name, got, tt.want)
		}
		// The State says what the packet itself would.
		p := Packet{RemainingCount: tt.s.RemainingCount, ExpiresAt: tt.s.ExpiresAt, Closed: tt.s.Closed}
		if got := p.StatusAt(now); got != tt.s.Status(now) {
			t.Errorf("%s: packet says %s, State says %s", tt.name, got, tt.s.Status(now))
		}
	}
}
