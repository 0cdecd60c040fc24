package dashboard

import (
	"context"
	"math"
	"slices"
	"time"

	"github.com/hongbao-dev/hongbao/set/topology"
)

// journalTimeout bounds one read of the rebalance journal: a meta DB that
// does not answer leaves the rebalance panel in an error state, never the
// page waiting.
const journalTimeout = 700 * time.Millisecond

// maxListed is how many moves the in-flight and failed lists carry at most
// (the step counts always count them all).
const maxListed = 32

// steps is the order in which a bucket's move passes its steps, the order
// the step counts are shown in.
var steps = []string{topology.Planned, topology.Copying, topology.CatchingUp, topology.Frozen,
	topology.Disowning, topology.Published, topology.Done, topology.Failed}

// Rebalance is the newest rebalance of the journal as the dashboard shows
// it: how far it got, what is moving now, how long its buckets were frozen,
// and what failed.
type Rebalance struct {
	ID        int64     `json:"id"`
	Kind      string    `json:"kind"`  // apply, drain, reverse, move
	State     string    `json:"state"` // running, done, failed
	Reverses  int64     `json:"reverses,omitempty"`
	Note      string    `json:"note,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// UpdatedAt is the latest change to the rebalance or any of its moves.
	UpdatedAt time.Time `json:"updated_at"`

	Buckets int `json:"buckets"` // moves in the plan
	// BucketsDone counts the moves whose bucket the target serves: step
	// published (the source's copy not yet deleted) or done.
	BucketsDone   int         `json:"buckets_done"`
	BucketsFailed int         `json:"buckets_failed"`
	RowsPlanned   int64       `json:"rows_planned"`
	RowsCopied    int64       `json:"rows_copied"`
	Steps         []StepCount `json:"steps"`     // buckets per step, in the steps' order; steps with none left out
	InFlight      []Move      `json:"in_flight"` // begun, not yet published (copying to disowning), at most 32
	Failed        []Move      `json:"failed"`    // failed moves with their errors, at most 32
	Freeze        Freeze      `json:"freeze"`    // of the BucketsDone moves

	// ElapsedS runs from the first move's start (the rebalance's creation
	// before any) to now while running, to its last update once over.
	ElapsedS      float64 `json:"elapsed_s"`
	BucketsPerMin float64 `json:"buckets_per_min"` // BucketsDone over ElapsedS
	RowsPerS      float64 `json:"rows_per_s"`      // RowsCopied over ElapsedS
	// ETAS is the time left at BucketsPerMin for the buckets neither done
	// nor failed: only while running and once a bucket is done.
	ETAS *float64 `json:"eta_s,omitempty"`
}

// StepCount is how many of a rebalance's buckets are at one step.
type StepCount struct {
	Step    string `json:"step"`
	Buckets int    `json:"buckets"`
}

// Freeze summarises how long the source's fence held done moves' buckets
// (no write of them committed anywhere), in milliseconds: nearest-rank
// percentiles.
type Freeze struct {
	Buckets int `json:"buckets"`
	P50MS   int `json:"p50_ms"`
	P99MS   int `json:"p99_ms"`
	MaxMS   int `json:"max_ms"`
}

// Move is one bucket's move in the in-flight or failed list.
type Move struct {
	Bucket      int        `json:"bucket"`
	From        string     `json:"from"`
	To          string     `json:"to"`
	Step        string     `json:"step"`
	RowsPlanned int64      `json:"rows_planned"`
	RowsCopied  int64      `json:"rows_copied"`
	Passes      int        `json:"passes"`
	FreezeMS    int        `json:"freeze_ms,omitempty"`
	Error       string     `json:"error,omitempty"`
	StartedAt   *time.Time `json:"started_at,omitempty"` // nil until begun
	UpdatedAt   time.Time  `json:"updated_at"`
}

// begun reports whether a journal time is set: the journal reads a move
// not begun as the zero time or as 1970-01-01.
func begun(t time.Time) bool { return t.Unix() > 0 }

// Progress computes what the dashboard shows of rebalance r at now; nil
// for nil.
func Progress(r *topology.Rebalance, now time.Time) *Rebalance {
	if r == nil {
		return nil
	}
	p := &Rebalance{ID: r.ID, Kind: r.Kind, State: r.State, Reverses: r.Reverses, Note: r.Note,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Buckets: len(r.Moves),
		Steps: []StepCount{}, InFlight: []Move{}, Failed: []Move{}}
	start := time.Time{}
	count := map[string]int{}
	var freezes []int
	for _, m := range r.Moves {
		count[m.Step]++
		p.RowsPlanned += m.RowsPlanned
		p.RowsCopied += m.RowsCopied
		if m.UpdatedAt.After(p.UpdatedAt) {
			p.UpdatedAt = m.UpdatedAt
		}
		if begun(m.StartedAt) && (start.IsZero() || m.StartedAt.Before(start)) {
			start = m.StartedAt
		}
		switch m.Step {
		case topology.Published, topology.Done:
			p.BucketsDone++
			freezes = append(freezes, m.FreezeMS)
		case topology.Failed:
			p.BucketsFailed++
			if len(p.Failed) < maxListed {
				p.Failed = append(p.Failed, move(m))
			}
		case topology.Copying, topology.CatchingUp, topology.Frozen, topology.Disowning:
			if len(p.InFlight) < maxListed {
				p.InFlight = append(p.InFlight, move(m))
			}
		}
	}
	for _, s := range steps {
		if n := count[s]; n > 0 {
			p.Steps = append(p.Steps, StepCount{Step: s, Buckets: n})
			delete(count, s)
		}
	}
	for _, s := range sortedKeys(count) { // steps of a newer hbctl, last
		p.Steps = append(p.Steps, StepCount{Step: s, Buckets: count[s]})
	}
	p.Freeze = freeze(freezes)

	if start.IsZero() {
		start = r.CreatedAt
	}
	end := now
	if r.State != topology.Running {
		end = p.UpdatedAt
	}
	if el := end.Sub(start).Seconds(); el > 0 {
		p.ElapsedS = el
		p.BucketsPerMin = float64(p.BucketsDone) / el * 60
		p.RowsPerS = float64(p.RowsCopied) / el
	}
	if r.State == topology.Running && p.BucketsDone > 0 && p.ElapsedS > 0 {
		eta := float64(p.Buckets-p.BucketsDone-p.BucketsFailed) * p.ElapsedS / float64(p.BucketsDone)
		p.ETAS = &eta
	}
	return p
}

// move is a journal move as listed.
func move(m topology.Move) Move {
	out := Move{Bucket: int(m.Bucket), From: m.From, To: m.To, Step: m.Step, RowsPlanned: m.RowsPlanned,
		RowsCopied: m.RowsCopied, Passes: m.Passes, FreezeMS: m.FreezeMS, Error: m.Error, UpdatedAt: m.UpdatedAt}
	if begun(m.StartedAt) {
		at := m.StartedAt
		out.StartedAt = &at
	}
	return out
}

// freeze returns the nearest-rank p50 and p99 and the maximum of ms.
func freeze(ms []int) Freeze {
	if len(ms) == 0 {
		return Freeze{}
	}
	slices.Sort(ms)
	rank := func(q float64) int { return ms[max(int(math.Ceil(q*float64(len(ms))))-1, 0)] }
	return Freeze{Buckets: len(ms), P50MS: rank(0.50), P99MS: rank(0.99), MaxMS: ms[len(ms)-1]}
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// rebalance reads the newest rebalance from the journal in the meta DB,
// once, within journalTimeout. It answers the rebalance (nil when the
// journal is empty), a note for people, and an error when the journal
// could not be read.
func (b *Board) rebalance(ctx context.Context, now time.Time) (*Rebalance, string, string) {
	if b.d.Meta == nil {
		return nil, "the rebalance journal is not read: no meta DB given to the dashboard", ""
	}
	ctx, cancel := context.WithTimeout(ctx, journalTimeout)
	defer cancel()
	if b.journal == nil {
		j, err := topology.NewJournal(ctx, b.d.Meta, b.d.Now)
		if err != nil {
			return nil, "", err.Error()
		}
		b.journal = j
	}
	r, err := b.journal.Latest(ctx)
	if err != nil {
		return nil, "", err.Error()
	}
	if r == nil {
		return nil, "no rebalance yet", ""
	}
	return Progress(r, now), "", ""
}
