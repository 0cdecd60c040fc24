package move

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/lease"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/migrate"
)

// Operator is what an operator's commands do with moves (hbctl rebalance,
// topology move, set drain): plan, start, reverse, move one bucket, over
// the meta database, its journal and the SETs' pools.
type Operator struct {
	// Meta is the meta database, Journal its journal of rebalances.
	Meta    *sql.DB
	Journal *topology.Journal
	// Fleet is the SETs' pools, opened as the commands need them.
	Fleet *Fleet
	// Leases and Holder are given to every Mover (Mover.Leases).
	Leases *lease.Client
	Holder string
	loc    *time.Location
	now    func() time.Time
}

// OpenOperator opens the meta database at metaDSN (its core group's
// members core) and its journal; loc is the zone of the day tables, for
// the buckets' loads; now is the wall clock the journal's leases and the
// loads are stamped with (they cross hosts). Close closes what it opened.
func OpenOperator(ctx context.Context, metaDSN string, core []string, loc *time.Location, now func() time.Time) (*Operator, error) {
	meta, err := topology.OpenMeta(ctx, metaDSN, core, false)
	if err != nil {
		return nil, err
	}
	j, err := topology.NewJournal(ctx, meta, now)
	if err != nil {
		meta.Close()
		return nil, err
	}
	return &Operator{Meta: meta, Journal: j, Fleet: &Fleet{}, loc: loc, now: now}, nil
}

// Close closes the SETs' pools, the meta database and the connection to
// etcd (Leases), if any.
func (o *Operator) Close() {
	o.Fleet.Close()
	o.Meta.Close()
	if o.Leases != nil {
		_ = o.Leases.Close() // leases still held expire after their TTL
	}
}

// Mover returns a mover of o's journal and pools moving parallel buckets
// at once, keeping a source's copy for grace after the publish; the
// caller sets its Report (and a test its Knobs).
func (o *Operator) Mover(parallel int, grace time.Duration) *Mover {
	return &Mover{Meta: o.Meta, Journal: o.Journal, Fleet: o.Fleet, Now: o.now, Parallel: parallel, Grace: grace,
		Leases: o.Leases, Holder: o.Holder}
}

// LockIdle takes the journal's lock for a new rebalance, refusing while
// one is unfinished.
func (o *Operator) LockIdle(ctx context.Context) (func(), error) {
	release, err := o.Journal.Lock(ctx)
	if err != nil {
		return nil, err
	}
	r, err := o.Journal.Unfinished(ctx)
	if err == nil && r != nil {
		err = fmt.Errorf("rebalance %d is unfinished: run hbctl rebalance apply to finish it first", r.ID)
	}
	if err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// Plan computes the moves that even out the fleet now.
func (o *Operator) Plan(ctx context.Context) (*topology.Map, []topology.PlannedMove, []topology.Share, error) {
	t, err := topology.Load(ctx, o.Meta)
	if err != nil {
		return nil, nil, nil, err
	}
	loads, err := o.Fleet.Loads(ctx, t, o.loc, o.now())
	if err != nil {
		return nil, nil, nil, err
	}
	moves, shares := topology.Plan(t, loads)
	return t, moves, shares, nil
}

// PlannedMoves are the journal's moves of a plan.
func PlannedMoves(ps []topology.PlannedMove) []topology.Move {
	out := make([]topology.Move, len(ps))
	for i, p := range ps {
		out[i] = topology.Move{Bucket: p.Bucket, From: p.From, To: p.To, RowsPlanned: p.Load.Rows}
	}
	return out
}

// Reversal journals the rebalance that moves back the buckets of the last
// finished rebalance that are still where it put them. The caller holds
// the journal's lock (LockIdle).
func (o *Operator) Reversal(ctx context.Context) (*topology.Rebalance, error) {
	last, err := o.Journal.LatestDone(ctx)
	if err != nil {
		return nil, err
	}
	if last == nil {
		return nil, errors.New("no finished rebalance to reverse")
	}
	t, err := topology.Load(ctx, o.Meta)
	if err != nil {
		return nil, err
	}
	var back []topology.Move
	for _, m := range last.Moves {
		if m.Step == topology.Done && t.Owner(m.Bucket).Name == m.To {
			if _, ok := t.Set(m.From); ok {
				back = append(back, topology.Move{Bucket: m.Bucket, From: m.To, To: m.From, RowsPlanned: m.RowsCopied})
			}
		}
	}
	if len(back) == 0 {
		return nil, fmt.Errorf("rebalance %d moved nothing that is still where it put it", last.ID)
	}
	return o.Journal.Create(ctx, "reverse", last.ID, fmt.Sprintf("reverses rebalance %d", last.ID), back)
}

// MoveBucket moves bucket b from SET from to SET to with mv, live: a
// rebalance of one move, journalled like any other, under the journal's
// lock.
func (o *Operator) MoveBucket(ctx context.Context, mv *Mover, b hongbao.Bucket, from, to string) error {
	release, err := o.LockIdle(ctx)
	if err != nil {
		return err
	}
	defer release()
	r, err := o.Journal.Create(ctx, "move", 0, "", []topology.Move{{Bucket: b, From: from, To: to}})
	if err != nil {
		return err
	}
	return mv.Apply(ctx, r)
}

// DropLeftovers finishes a move that stopped after publishing the new
// topology t: a SET that no longer claims b in its fence holds only a
// stale copy of b's rows (the owner has them), which is deleted. It
// returns the SETs whose fence still claims b: the topology was changed
// without a move, their rows may be the only copy, and they are kept.
func (o *Operator) DropLeftovers(ctx context.Context, t *topology.Map, b hongbao.Bucket) ([]string, error) {
	owner := t.Owner(b).Name
	var kept []string
	for i := range t.Sets {
		s := &t.Sets[i]
		if s.Name == owner {
			continue
		}
		side, err := o.Fleet.Side(s)
		if err != nil {
			return kept, err
		}
		held, busy, err := fence.Holds(ctx, side.Live, s.Name, b)
		if err != nil {
			return kept, fmt.Errorf("SET %s: %w", s.Name, err)
		}
		if held || busy {
			kept = append(kept, s.Name)
			continue
		}
		if err := migrate.Drop(ctx, side, b); err != nil {
			return kept, fmt.Errorf("SET %s: %w", s.Name, err)
		}
	}
	return kept, nil
}
