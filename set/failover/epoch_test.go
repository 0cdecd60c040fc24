package failover

import (
	"testing"
	"time"
)

// TestEpochGrowsOnASkewedHost: the epoch a promotion stamps is above the
// highest a member carries whatever the promoting host's clock says: a
// host minutes behind the one that stamped the highest (the case of
// docs/REPLICATION.md's clocks table) stamps highest+1, a host ahead its
// time in milliseconds.
func TestEpochGrowsOnASkewedHost(t *testing.T) {
	stamped := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC) // by the last promotion's host
	highest := stamped.UnixMilli()
	for _, tc := range []struct {
		name   string
		offset time.Duration // of the promoting host's clock from the last promoter's
		want   int64
	}{
		{"5 min behind", -5 * time.Minute, highest + 1},
		{"same millisecond", 0, highest + 1},
		{"1 ms ahead", time.Millisecond, highest + 1},
		{"5 min ahead", 5 * time.Minute, stamped.Add(5 * time.Minute).UnixMilli()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reparenter{Now: func() time.Time { return stamped.Add(tc.offset) }}
			if got := r.nextEpoch(highest); got != tc.want || got <= highest {
				t.Errorf("a host %v from the last promoter stamps epoch %d over %d; want %d", tc.offset, got, highest, tc.want)
			}
		})
	}
}
