package hongbao

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestMintPicksTheSendersBucket(t *testing.T) {
	m := NewMinter(func() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) })
	var got PacketID
	if err := m.Mint(42, "key-1", func(id PacketID) error { got = id; return nil }); err != nil {
		t.Fatal(err)
	}
	if want := BucketFor(42, []byte("key-1")); got.Bucket() != want {
		t.Errorf("bucket %d, want BucketFor(42, key-1) = %d", got.Bucket(), want)
	}
	// A retried send (same sender and key) lands in the same bucket.
	var again PacketID
	_ = m.Mint(42, "key-1", func(id PacketID) error { again = id; return nil })
	if again.Bucket() != got.Bucket() || again == got {
		t.Errorf("retry minted %s (bucket %d) after %s (bucket %d): want a new ID in the same bucket", again, again.Bucket(), got, got.Bucket())
	}
}

func TestMintWithoutKeySpreads(t *testing.T) {
	m := NewMinter(time.Now)
	buckets := map[Bucket]bool{}
	for range 200 {
		if err := m.Mint(42, "", func(id PacketID) error { buckets[id.Bucket()] = true; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if len(buckets) < 150 { // 200 random draws of 1000 buckets: ~181 distinct
		t.Errorf("keyless sends of one sender used %d buckets of 200 sends: want them spread", len(buckets))
	}
}

func TestMintRetriesCollisionsOnly(t *testing.T) {
	other := errors.New("insufficient funds")
	tests := []struct {
		name      string
		fails     []error // what try answers, call by call
		wantCalls int
		wantErr   error
	}{
		{"first ID free", []error{nil}, 1, nil},
		{"one collision", []error{ErrDuplicateID, nil}, 2, nil},
		{"wrapped collision", []error{fmt.Errorf("create: %w", ErrDuplicateID), nil}, 2, nil},
		{"another error is final", []error{other}, 1, other},
		{"collisions exhausted", []error{ErrDuplicateID, ErrDuplicateID, ErrDuplicateID, ErrDuplicateID, nil}, 4, ErrDuplicateID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMinter(time.Now)
			var ids []PacketID
			err := m.Mint(7, "k", func(id PacketID) error {
				ids = append(ids, id)
				return tt.fails[len(ids)-1]
			})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if len(ids) != tt.wantCalls {
				t.Errorf("%d tries, want %d", len(ids), tt.wantCalls)
			}
			for i := 1; i < len(ids); i++ {
				if ids[i] == ids[i-1] || ids[i].Bucket() != ids[0].Bucket() {
					t.Errorf("try %d got %s after %s: want a fresh ID in the same bucket", i, ids[i], ids[i-1])
				}
			}
		})
	}
}
