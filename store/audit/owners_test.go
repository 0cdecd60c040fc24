package audit

import (
	"maps"
	"slices"
	"strings"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// TestAssign: every bucket is counted by exactly one SET's snapshot at
// each point of a move's handover, or the pass is read again; the rules
// are those of the comment above settleFor. Bucket 7 moves from a to b;
// every other bucket stays on a, whose fence holds it.
func TestAssign(t *testing.T) {
	const moving = hongbao.Bucket(7)
	onA := func(hongbao.Bucket) string { return "a" }
	movedToB := func(b hongbao.Bucket) string {
		if b == moving {
			return "b"
		}
		return "a"
	}
	disowning := map[hongbao.Bucket]topology.Move{moving: {Bucket: moving, From: "a", To: "b", Step: topology.Disowning}}
	none := map[hongbao.Bucket]topology.Move{}
	for _, tc := range []struct {
		name       string
		v1         int64
		t0, t1     func(hongbao.Bucket) string
		d0, d1     map[hongbao.Bucket]topology.Move
		aHas, bHas bool   // whether a's and b's fences hold bucket 7
		want       string // the SET counting bucket 7; "": read again
	}{
		{"before the move", 1, onA, onA, none, none, true, false, "a"},
		{"both fences (claimed, or a stale claim a dead mover left): the topology's owner", 1, onA, onA, none, none, true, true, "a"},
		{"both fences, disowning: the topology's owner", 1, onA, onA, disowning, disowning, true, true, "a"},
		{"released, disowning before the pass: the target", 1, onA, onA, disowning, disowning, false, true, "b"},
		{"released during the pass", 1, onA, onA, none, disowning, false, true, ""},
		{"released, target not yet claimed in its snapshot", 1, onA, onA, none, disowning, false, false, ""},
		{"published during the pass", 2, onA, movedToB, disowning, none, false, true, ""},
		{"published before the pass", 2, movedToB, movedToB, none, none, false, true, "b"},
		{"the topology moved without the fence: the fence's holder", 2, movedToB, movedToB, none, none, true, false, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := ownerView{v0: 1, v1: tc.v1, t0: tc.t0, t1: tc.t1, d0: tc.d0, d1: tc.d1, fences: map[string]map[hongbao.Bucket]bool{
				"a": fenceOf(true, tc.aHas, moving), "b": fenceOf(false, tc.bHas, moving),
			}}
			counted, unsettled := assign(v)
			var by []string
			for _, name := range slices.Sorted(maps.Keys(counted)) {
				if counted[name][moving] {
					by = append(by, name)
				}
			}
			switch {
			case tc.want == "" && !slices.Equal(unsettled, []hongbao.Bucket{moving}):
				t.Errorf("unsettled %v (counted by %v), want bucket %d read again", unsettled, by, moving)
			case tc.want != "" && (len(unsettled) > 0 || !slices.Equal(by, []string{tc.want})):
				t.Errorf("bucket %d counted by %v (unsettled %v), want %s", moving, by, unsettled, tc.want)
			}
			if len(counted["a"])+len(counted["b"]) != hongbao.Buckets-len(unsettled) || !counted["a"][moving+1] {
				t.Errorf("%d buckets counted, %d unsettled: want each counted once", len(counted["a"])+len(counted["b"]), len(unsettled))
			}
		})
	}
	t.Run("the meta database went back", func(t *testing.T) {
		_, unsettled := assign(ownerView{v0: 2, v1: 1, t0: onA, t1: onA, fences: map[string]map[hongbao.Bucket]bool{"a": fenceOf(true, true, moving)}})
		if len(unsettled) != hongbao.Buckets {
			t.Errorf("%d buckets read again, want all", len(unsettled))
		}
	})
}

// fenceOf is a fence holding moving if has, and every other bucket if
// others.
func fenceOf(others, has bool, moving hongbao.Bucket) map[hongbao.Bucket]bool {
	f := map[hongbao.Bucket]bool{}
	for b := range hongbao.Bucket(hongbao.Buckets) {
		if b == moving && has || b != moving && others {
			f[b] = true
		}
	}
	return f
}

// TestStaleClaims: verify names a claim that neither the topology nor a
// Disowning move backs (a dead mover's), by SET and bucket, and no other:
// not the owner's row, not a live move's target, not a published one.
func TestStaleClaims(t *testing.T) {
	const moving = hongbao.Bucket(7)
	onA := func(hongbao.Bucket) string { return "a" }
	movedToB := func(b hongbao.Bucket) string {
		if b == moving {
			return "b"
		}
		return "a"
	}
	disowning := map[hongbao.Bucket]topology.Move{moving: {Bucket: moving, From: "a", To: "b", Step: topology.Disowning}}
	none := map[hongbao.Bucket]topology.Move{}
	for _, tc := range []struct {
		name   string
		t0, t1 func(hongbao.Bucket) string
		d0, d1 map[hongbao.Bucket]topology.Move
		aHas   bool // the source's fence holds bucket 7
		want   int
	}{
		{"a dead mover's claim", onA, onA, none, none, true, 1},
		{"a live move's claim", onA, onA, disowning, disowning, true, 0},
		{"claimed, then disowning seen after the snapshots", onA, onA, none, disowning, true, 0},
		{"released, disowning", onA, onA, disowning, disowning, false, 0},
		{"published", movedToB, movedToB, none, none, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := ownerView{v0: 1, v1: 1, t0: tc.t0, t1: tc.t1, d0: tc.d0, d1: tc.d1, fences: map[string]map[hongbao.Bucket]bool{
				"a": fenceOf(true, tc.aHas, moving), "b": fenceOf(false, true, moving),
			}}
			got := staleClaims(v)
			if len(got) != tc.want {
				t.Fatalf("stale claims %q, want %d", got, tc.want)
			}
			if tc.want == 1 && !strings.Contains(got[0], "SET b: stale claim of bucket 7") || tc.want == 1 && !strings.Contains(got[0], "to SET a") {
				t.Errorf("violation %q does not name SET b, bucket 7 and its owner a", got[0])
			}
		})
	}
}
