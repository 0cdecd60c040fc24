package topology

import (
	"maps"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
)

// TestTrusted: a SET acts on a fence bucket only when the map gives it the
// bucket and the map is not older than the claim.
func TestTrusted(t *testing.T) {
	m := &Map{Version: 7, Sets: []Set{{Name: "a"}, {Name: "c"}}}
	for b := range m.owner {
		m.owner[b] = b % 2 // even buckets a, odd c
	}
	fence := map[hongbao.Bucket]int64{
		2: 1, // a's since the start
		4: 7, // moved to a at this version
		6: 8, // claimed after this map was read: not trusted yet
		3: 5, // c's bucket, a stale claim of a
	}
	want := map[hongbao.Bucket]bool{2: true, 4: true}
	if got := m.Trusted("a", fence); !maps.Equal(got, want) {
		t.Errorf("Trusted(a) = %v, want %v", got, want)
	}
	if got := m.Trusted("c", fence); !maps.Equal(got, map[hongbao.Bucket]bool{3: true}) {
		t.Errorf("Trusted(c) = %v, want bucket 3 only", got)
	}
}
