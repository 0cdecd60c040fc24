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
	LoadBefore, LoadAfter float64 // fractions of the fleet's data (rows and recent packets)
	Target                float64 // the fraction of the buckets it should own
}

// Plan computes the fewest bucket moves that spread the buckets over the
// active SETs in proportion to their weights (none on draining SETs), and
// chooses which buckets move so that the data evens out too.
//
// Buckets first: new packets hash uniformly over the buckets, so a SET's
// share of the buckets is its share of tomorrow's traffic, and a new SET
// given only the few heaviest buckets would stay idle while the others
// stay hot. The number of moves is the least that reaches every SET's
// bucket target. Then data: each move takes, from the SET furthest above
// its bucket target, the bucket whose load (its rows and recent packets,
// as fractions of the fleet's) is nearest what the receiving SET still
// lacks per bucket it still lacks, so the receiver ends with its share of
// the rows and of the recent packets as well.
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
	want := bucketTargets(m)
	var total float64
	for _, l := range load {
		total += l
	}
	shares := make([]Share, len(m.Sets))
	for i, s := range m.Sets {
		shares[i] = Share{Name: s.Name, State: s.State, Weight: s.Weight, BucketsBefore: count[i], LoadBefore: frac(load[i], total),
			Target: float64(want[i]) / hongbao.Buckets}
	}
	var moves []PlannedMove
	for {
		from, to := -1, -1
		for i := range count {
			if count[i] > want[i] && (from < 0 || count[i]-want[i] > count[from]-want[from]) {
				from = i
			}
			if count[i] < want[i] && (to < 0 || want[i]-count[i] > want[to]-count[to]) {
				to = i
			}
		}
		if from < 0 || to < 0 {
			break
		}
		// What the receiver lacks of its share of the data, per bucket
		// it still lacks.
		need := (total*float64(want[to])/hongbao.Buckets - load[to]) / float64(want[to]-count[to])
		b := pick(owner, score, from, need)
		owner[b] = to
		load[from] -= score[b]
		load[to] += score[b]
		count[from]--
		count[to]++
		moves = append(moves, PlannedMove{Bucket: hongbao.Bucket(b), From: m.Sets[from].Name, To: m.Sets[to].Name, Load: loads[hongbao.Bucket(b)]})
	}
	for i := range shares {
		shares[i].After, shares[i].LoadAfter = count[i], frac(load[i], total)
	}
	slices.SortFunc(moves, func(a, b PlannedMove) int { return cmp.Compare(a.Bucket, b.Bucket) })
	return moves, shares
}

func frac(x, total float64) float64 {
	if total == 0 {
		return 0
	}
	return x / total
}

// scores gives each bucket its data: its rows and its recent packets, each
// as a fraction of the fleet's, weighing the same (a part the fleet has
// none of counts for nothing).
func scores(loads map[hongbao.Bucket]BucketLoad) []float64 {
	var rows, recent int64
	for _, l := range loads {
		rows += l.Rows
		recent += l.Recent
	}
	s := make([]float64, hongbao.Buckets)
	for b := range s {
		l := loads[hongbao.Bucket(b)]
		if rows > 0 {
			s[b] += float64(l.Rows) / float64(rows)
		}
		if recent > 0 {
			s[b] += float64(l.Recent) / float64(recent)
		}
	}
	return s
}

// bucketTargets is each SET's number of buckets: by weight among the
// active SETs (largest remainders get the odd buckets, the earlier SET
// first), none for draining ones.
func bucketTargets(m *Map) []int {
	weights := 0
	for _, s := range m.Sets {
		if s.State != Draining {
			weights += max(s.Weight, 1)
		}
	}
	t := make([]int, len(m.Sets))
	if weights == 0 {
		return t
	}
	rest := make([]int, 0, len(m.Sets))
	left := hongbao.Buckets
	for i, s := range m.Sets {
		if s.State == Draining {
			continue
		}
		t[i] = hongbao.Buckets * max(s.Weight, 1) / weights
		left -= t[i]
		rest = append(rest, i)
	}
	slices.SortStableFunc(rest, func(a, b int) int {
		ra := hongbao.Buckets * max(m.Sets[a].Weight, 1) % weights
		rb := hongbao.Buckets * max(m.Sets[b].Weight, 1) % weights
		return cmp.Compare(rb, ra)
	})
	for _, i := range rest[:left] {
		t[i]++
	}
	return t
}

// pick chooses the bucket of SET from whose data is nearest need (the
// first such bucket: moves take contiguous runs when data is even).
func pick(owner []int, score []float64, from int, need float64) int {
	best := -1
	for b, o := range owner {
		if o == from && (best < 0 || math.Abs(score[b]-need) < math.Abs(score[best]-need)) {
			best = b
		}
	}
	return best
}
