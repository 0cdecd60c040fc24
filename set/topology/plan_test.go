package topology

import (
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
)

// fleet is a map of SETs a and b splitting the buckets (Spread), plus
// empty SETs named in extra.
func fleet(extra ...Set) *Map {
	m := Spread(1, []Set{{Name: "a", State: Active, Weight: 1}, {Name: "b", State: Active, Weight: 1}})
	m.Sets = append(m.Sets, extra...)
	return m
}

func counts(m *Map, moves []PlannedMove) map[string]int {
	c := map[string]int{}
	owner := map[hongbao.Bucket]string{}
	for b := range hongbao.Buckets {
		owner[hongbao.Bucket(b)] = m.Owner(hongbao.Bucket(b)).Name
	}
	for _, mv := range moves {
		if owner[mv.Bucket] != mv.From {
			panic("move from a SET that does not own the bucket")
		}
		owner[mv.Bucket] = mv.To
	}
	for _, s := range owner {
		c[s]++
	}
	return c
}

func TestPlan(t *testing.T) {
	hot := map[hongbao.Bucket]BucketLoad{}
	for b := range 500 { // SET a's buckets hold all the data
		hot[hongbao.Bucket(b)] = BucketLoad{Packets: 100, Rows: 1000, Recent: 10}
	}
	for _, tc := range []struct {
		name  string
		m     *Map
		loads map[hongbao.Bucket]BucketLoad
		moves int
		want  map[string]int
	}{
		{"balanced", fleet(), nil, 0, map[string]int{"a": 500, "b": 500}},
		{"new SET c", fleet(Set{Name: "c", State: Active, Weight: 1}), nil, 333, map[string]int{"a": 334, "b": 333, "c": 333}},
		{"new SET c of weight 2", fleet(Set{Name: "c", State: Active, Weight: 2}), nil, 500, map[string]int{"a": 250, "b": 250, "c": 500}},
		{"draining c", func() *Map {
			m := fleet(Set{Name: "c", State: Draining, Weight: 1})
			for b := range 100 { // taken from a: a 400, b 500, c 100
				m.owner[b] = 2
			}
			return m
		}(), nil, 100, map[string]int{"a": 500, "b": 500, "c": 0}},
		// Even bucket counts are left alone whatever the data: buckets
		// are the unit of tomorrow's traffic.
		{"data on a", fleet(), hot, 0, map[string]int{"a": 500, "b": 500}},
		// a's buckets hold all the data: c's 333 come 166 from a and 167
		// from b, so c gets a third of the data too.
		{"new SET c, data on a", fleet(Set{Name: "c", State: Active, Weight: 1}), hot, 333, map[string]int{"a": 334, "b": 333, "c": 333}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			moves, shares := Plan(tc.m, tc.loads)
			if len(moves) != tc.moves {
				t.Errorf("%d moves, want %d", len(moves), tc.moves)
			}
			got := counts(tc.m, moves)
			for name, n := range tc.want {
				if got[name] != n {
					t.Errorf("SET %s owns %d buckets after the plan, want %d (all: %v)", name, got[name], n, got)
				}
			}
			for _, s := range shares {
				if s.Name == "c" && tc.loads != nil && (s.LoadAfter < 0.33 || s.LoadAfter > 0.34) {
					t.Errorf("SET c's share of the data after the plan: %.3f, want a third", s.LoadAfter)
				}
				if s.After != got[s.Name] {
					t.Errorf("share of %s says %d buckets after, the moves give %d", s.Name, s.After, got[s.Name])
				}
				if s.State == Draining && s.After != 0 {
					t.Errorf("draining SET %s keeps %d buckets", s.Name, s.After)
				}
			}
			for i := 1; i < len(moves); i++ {
				if moves[i].Bucket <= moves[i-1].Bucket {
					t.Fatalf("moves not in bucket order, or a bucket moved twice: %v then %v", moves[i-1], moves[i])
				}
			}
		})
	}
}
