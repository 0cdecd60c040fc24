package router

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/topology"
)

var goldenTopology = topology.Spread(7, []topology.Set{
	{Name: "a", Servers: []string{"10.0.0.1:8081", "10.0.0.2:8081"}},
	{Name: "b", Servers: []string{"10.0.1.1:8081", "10.0.1.2:8081", "10.0.1.3:8081"}},
})

// TestRouteGolden pins the SET and server every packet goes to for a fixed
// topology, so no change can silently re-route live packets away from
// their queues (or their data).
func TestRouteGolden(t *testing.T) {
	cases := []struct {
		id     hongbao.PacketID
		set    string
		server []string
	}{
		{382855701820690432, "a", []string{"10.0.0.2:8081", "10.0.0.1:8081"}},                  // bucket 21
		{382855701903519744, "b", []string{"10.0.1.3:8081", "10.0.1.2:8081", "10.0.1.1:8081"}}, // bucket 787
		{4194304, "a", []string{"10.0.0.1:8081", "10.0.0.2:8081"}},                             // bucket 0
		{mustID(t, 999, 5), "b", []string{"10.0.1.2:8081", "10.0.1.1:8081", "10.0.1.3:8081"}},  // 265314243710971909
	}
	for _, c := range cases {
		owner, servers := Route(goldenTopology, c.id, nil)
		if owner.Name != c.set || !slices.Equal(servers, c.server) {
			t.Errorf("Route(%d, bucket %d) = %s %q, want %s %q", c.id, c.id.Bucket(), owner.Name, servers, c.set, c.server)
		}
	}
}

func mustID(t *testing.T, b hongbao.Bucket, seq int) hongbao.PacketID {
	t.Helper()
	id, err := hongbao.NewPacketID(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), b, seq)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestRankRemovalMovesOnlyItsPackets: with one of four servers gone, only
// the packets it held move, spread over the others, and every other packet
// stays where it was. Measured over 100,000 IDs.
func TestRankRemovalMovesOnlyItsPackets(t *testing.T) {
	servers := []string{"s1:1", "s2:1", "s3:1", "s4:1"}
	gone := "s3:1"
	healthy := func(s string) bool { return s != gone }
	r := rand.New(rand.NewPCG(1, 2))
	const n = 100_000
	held, moved := 0, map[string]int{}
	for range n {
		id := hongbao.PacketID(r.Int64N(1 << 62))
		before := Rank(servers, uint64(id), nil)[0]
		after := Rank(servers, uint64(id), healthy)[0]
		switch {
		case before == gone:
			held++
			if after == gone {
				t.Fatalf("packet %d still on the removed server", id)
			}
			moved[after]++
		case after != before:
			t.Fatalf("packet %d moved from %s to %s though its server is up", id, before, after)
		}
	}
	if held < n/4-n/40 || held > n/4+n/40 {
		t.Errorf("removed server held %d of %d packets, want about a quarter", held, n)
	}
	for _, s := range []string{"s1:1", "s2:1", "s4:1"} {
		if m := moved[s]; m < held/3-held/15 || m > held/3+held/15 {
			t.Errorf("%s took %d of %d moved packets, want about a third", s, m, held)
		}
	}
	t.Logf("%d of %d packets moved (%.1f%%), spread %v", held, n, 100*float64(held)/n, moved)
}

// TestRankUnhealthyLast keeps an unhealthy server as a last resort.
func TestRankUnhealthyLast(t *testing.T) {
	servers := []string{"x:1", "y:1"}
	for id := hongbao.PacketID(1); id < 200; id++ {
		got := Rank(servers, uint64(id), func(s string) bool { return s != "x:1" })
		if got[0] != "y:1" || got[1] != "x:1" {
			t.Fatalf("Rank(%d) = %v, want the healthy server first", id, got)
		}
	}
}
