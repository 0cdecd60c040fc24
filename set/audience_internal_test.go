package set

import (
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
)

// TestAudiencesBounded: audiences refuses only a user a remembered
// audience does not name, holds no packet without one, and forgets the
// packets learnt first when the users it holds pass its bound.
func TestAudiencesBounded(t *testing.T) {
	a := newAudiences(5)
	a.learn(1, hongbao.Audience{10, 11})
	a.learn(2, nil)
	a.learn(3, hongbao.Audience{30, 31, 32})
	a.learn(9, hongbao.Audience{1, 2, 3, 4, 5, 6}) // larger than the bound: never held
	for _, tt := range []struct {
		id      hongbao.PacketID
		user    hongbao.UserID
		refuses bool
	}{
		{1, 10, false}, {1, 12, true}, {2, 99, false}, {3, 31, false}, {3, 10, true}, {4, 1, false}, {9, 99, false},
	} {
		if got := a.refuses(tt.id, tt.user); got != tt.refuses {
			t.Errorf("refuses(%d, %d) = %v, want %v", tt.id, tt.user, got, tt.refuses)
		}
	}
	if a.held != 5 || len(a.packets) != 2 {
		t.Fatalf("held %d users in %d packets, want 5 in 2", a.held, len(a.packets))
	}
	a.learn(4, hongbao.Audience{40}) // 6 > 5: packet 1 goes
	if a.refuses(1, 12) || !a.refuses(4, 41) || !a.refuses(3, 10) || a.held != 4 {
		t.Errorf("after eviction: held %d, packets %v", a.held, a.packets)
	}
	a.learn(3, hongbao.Audience{99}) // an audience never changes: the first stays
	if !a.refuses(3, 99) {
		t.Error("a second learn replaced packet 3's audience")
	}
}
