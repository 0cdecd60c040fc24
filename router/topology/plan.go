package topology

import (
	"cmp"
	"math"
	"slices"

	hongbao "github.com/hongbao-dev/hongbao"
)

// BucketLoad is what a bucket holds, as its SET's tables tell it.
type BucketLoad struct {
	Packets int64 // packets in its day tables
	Rows    int64 // rows of its day tables and their details
	Recent  int64 // packets of today's and yesterday's day tables
}

// PlannedMove is one bucket to move.
type PlannedMove struct {
	Bucket   hongbao.Bucket
	From, To string
	Load     BucketLoad
}

// Share is a SET's part of the fleet before and after a plan.
type Share struct {
	Name, State           string
	Weight                int
	BucketsBefore, After  int
	LoadBefore, LoadAfter float64 // fractions of the fleet's load
	Target                float64 // the fraction it should carry
}

// Plan computes the fewest bucket moves that even out the load across the
// active SETs in proportion to their weights, and moves every bucket off
// draining SETs. A bucket's load counts three things equally, each as its
// fraction of the fleet's: one bucket (so an empty fleet evens out bucket
// counts), its rows, and its recent packets. The moves are greedy: each
// takes from the SET furthest above its target the largest bucket that
// does not overshoot the SET furthest below, while that brings the two
// closer.
func Plan(m *Map, loads map[hongbao.Bucket]BucketLoad) ([]PlannedMove, []Share) {
	score := scores(loads)
	owner := make([]int, hongbao.Buckets)
	load := make([]float64, len(m.Sets))
	count := make([]int, len(m.Sets))
	for b := range hongbao.Buckets {
		owner[b] = m.owner[b]
		load[owner[b]] += score[b]
		count[owner[b]]++
	}
	target := targets(m, load)
	shares := make([]Share, len(m.Sets))
	for i, s := range m.Sets {
		shares[i] = Share{Name: s.Name, State: s.State, Weight: s.Weight, BucketsBefore: count[i], LoadBefore: load[i], Target: target[i]}
	}
	var moves []PlannedMove
	for len(moves) < hongbao.Buckets {
		from, to := furthest(load, target, m.Sets)
		if from < 0 || to < 0 {
			break
		}
		b := pick(owner, score, from, load[from]-target[from], target[to]-load[to], m.Sets[from].State == Draining)
		if b < 0 {
			break
		}
		owner[b] = to
		load[from] -= score[b]
		load[to] += score[b]
		count[from]--
		count[to]++
		moves = append(moves, PlannedMove{Bucket: hongbao.Bucket(b), From: m.Sets[from].Name, To: m.Sets[to].Name, Load: loads[hongbao.Bucket(b)]})
	}
	for i := range shares {
		shares[i].After, shares[i].LoadAfter = count[i], load[i]
	}
	slices.SortFunc(moves, func(a, b PlannedMove) int { return cmp.Compare(a.Bucket, b.Bucket) })
	return moves, shares
}

// scores gives each bucket its load as a fraction of the fleet's: the
// three parts of Load weigh the same; a part the fleet has none of counts
// for nothing.
func scores(loads map[hongbao.Bucket]BucketLoad) []float64 {
	var rows, recent int64
	for _, l := range loads {
		rows += l.Rows
		recent += l.Recent
	}
	parts := 1.0
	if rows > 0 {
		parts++
	}
	if recent > 0 {
		parts++
	}
	s := make([]float64, hongbao.Buckets)
	for b := range s {
		l := loads[hongbao.Bucket(b)]
		v := 1.0 / hongbao.Buckets
		if rows > 0 {
			v += float64(l.Rows) / float64(rows)
		}
		if recent > 0 {
			v += float64(l.Recent) / float64(recent)
		}
		s[b] = v / parts
	}
	return s
}

// targets is each SET's fair part of the total: by weight among active
// SETs, nothing for draining ones.
func targets(m *Map, load []float64) []float64 {
	var total float64
	for _, l := range load {
		total += l
	}
	weights := 0
	for _, s := range m.Sets {
		if s.State != Draining {
			weights += max(s.Weight, 1)
		}
	}
	t := make([]float64, len(m.Sets))
	if weights == 0 {
		return t
	}
	for i, s := range m.Sets {
		if s.State != Draining {
			t[i] = total * float64(max(s.Weight, 1)) / float64(weights)
		}
	}
	return t
}

// furthest returns the SET most above its target (a draining SET holding
// anything first) and the active SET most below its target.
func furthest(load, target []float64, sets []Set) (from, to int) {
	from, to = -1, -1
	var over, under float64
	for i := range load {
		d := load[i] - target[i]
		if sets[i].State == Draining && load[i] > 0 {
			d += 1 // before any active SET
		}
		if d > over {
			from, over = i, d
		}
		if sets[i].State != Draining && -d > under {
			to, under = i, -d
		}
	}
	return from, to
}

// pick chooses the bucket of SET from to move: of those whose move
// lowers the sum of every SET's distance to its target (smaller than twice
// the gap, the lesser of the excess and the deficit), the one nearest the
// gap in size; from a draining SET, the smallest when none is. It returns
// -1 for none.
func pick(owner []int, score []float64, from int, excess, deficit float64, draining bool) int {
	gap := min(excess, deficit)
	best, smallest := -1, -1
	for b, o := range owner {
		if o != from {
			continue
		}
		if score[b] < 2*gap && (best < 0 || math.Abs(score[b]-gap) < math.Abs(score[best]-gap)) {
			best = b
		}
		if smallest < 0 || score[b] < score[smallest] {
			smallest = b
		}
	}
	if best < 0 && draining {
		return smallest
	}
	return best
}
