package set

import (
	"errors"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

func nonce(i int) [16]byte {
	var n [16]byte
	n[0], n[1], n[15] = byte(i), byte(i>>8), 0x5a
	return n
}

// TestNoncesRefuseReplay: a nonce is refused for as long as a request
// carrying it could pass the time check (2 x window after it was first
// seen), and forgotten some 4 x window after.
func TestNoncesRefuseReplay(t *testing.T) {
	const w = 10 * time.Second
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		first time.Duration // when nonce 1 is first used, after t0
		again time.Duration // when it comes again
		want  error
	}{
		{"at once", 0, 0, api.ErrReplayed},
		{"a window later", 0, w, api.ErrReplayed},
		{"2 windows later", 0, 2 * w, api.ErrReplayed},
		{"first late in its generation", 19 * time.Second, 19*time.Second + 2*w, api.ErrReplayed},
		{"5 windows later", 0, 5 * w, nil},
		{"long after", 0, time.Hour, nil},
	}
	for _, tt := range tests {
		n := newNonces(w, 100)
		if err := n.use(nonce(0), t0); err != nil { // starts the first generation
			t.Fatal(err)
		}
		if err := n.use(nonce(1), t0.Add(tt.first)); err != nil {
			t.Fatalf("%s: first use: %v", tt.name, err)
		}
		// Other traffic in between rotates the generations.
		for at := tt.first; at < tt.again; at += time.Second {
			_ = n.use(nonce(1000+int(at/time.Second)), t0.Add(at))
		}
		if err := n.use(nonce(1), t0.Add(tt.again)); !errors.Is(err, tt.want) && (err != nil || tt.want != nil) {
			t.Errorf("%s: second use = %v, want %v", tt.name, err, tt.want)
		}
	}
}

// TestNoncesBounded: memory stays under the bound; at the bound requests
// are refused busy (the router tries another server), never let through
// by forgetting a nonce early, and an idle server forgets everything.
func TestNoncesBounded(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	n := newNonces(10*time.Second, 50)
	for i := range 50 {
		if err := n.use(nonce(i), t0); err != nil {
			t.Fatalf("nonce %d: %v", i, err)
		}
	}
	if err := n.use(nonce(50), t0); !errors.Is(err, hongbao.ErrBusy) {
		t.Errorf("over the bound: %v, want busy", err)
	}
	if err := n.use(nonce(3), t0); !errors.Is(err, api.ErrReplayed) {
		t.Errorf("replay at the bound: %v, want replayed", err)
	}
	if n.size() != 50 {
		t.Errorf("size %d, want 50", n.size())
	}
	if err := n.use(nonce(51), t0.Add(time.Minute)); err != nil {
		t.Errorf("after a minute: %v", err)
	}
	if n.size() != 1 {
		t.Errorf("after a minute idle: size %d, want 1", n.size())
	}
}
