package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/move"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// moverSteps are the points a mover is killed at: each step of the
// journal, and between the target's claim and the source's release.
var moverSteps = []string{topology.Copying, topology.Frozen, move.StepClaimed, topology.Disowning, topology.Published}

// errKilled is the mover killed by killMover's knob.
var errKilled = errors.New("killed at its step (a knob, as kill -9)")

// killMover is issue #23's second check as a fault: a move of a bucket
// that holds live packets (hbctl topology move's, run in this process),
// killed (as kill -9) at one of its steps by a knob, its pools closed as a
// dead process's sockets close, while the load goes on opening them and they expire. Each SET
// must then pay out, refund and archive only the buckets it owns in the
// topology: recovered once exactly one SET's fence holds the bucket, the
// one the topology names (a stale claim is removed by whoever finds it),
// and the operator's hbctl rebalance apply finished the move.
func (d *dev) killMover(ctx context.Context) (string, time.Duration, error) {
	meta, err := topology.OpenMeta(ctx, d.cfg.MetaDSN, d.cfg.CoreMembers(), false)
	if err != nil {
		return "", 0, err
	}
	defer meta.Close()
	t, err := topology.Load(ctx, meta)
	if err != nil {
		return "", 0, err
	}
	var sets []topology.Set
	for _, s := range t.Sets {
		if s.State == topology.Active {
			sets = append(sets, s)
		}
	}
	if len(sets) < 2 {
		return "", 0, errors.New("fewer than two SETs: nothing to move between")
	}
	b := hongbao.Bucket(d.rng.IntN(hongbao.Buckets))
	from := t.Owner(b).Name
	to := from
	for to == from {
		to = sets[d.rng.IntN(len(sets))].Name
	}
	step := moverSteps[d.rng.IntN(len(moverSteps))]
	target := fmt.Sprintf("bucket %d %s -> %s, killed at %s", b, from, to, step)
	t0 := time.Now()
	if err := d.moveKilled(ctx, b, from, to, step); !errors.Is(err, errKilled) {
		return target, time.Since(t0), fmt.Errorf("move killed at %s: %v (want it killed there)", step, err)
	}
	time.Sleep(2 * time.Second) // opens of the bucket's packets go on
	if _, err := until(ctx, t0, func() error { return d.oneFence(ctx, meta, b) }); err != nil {
		return target, time.Since(t0), err
	}
	if _, err := until(ctx, t0, func() error {
		out, err := d.hbctl(ctx, "rebalance", "apply", "-config", d.config)
		if err != nil {
			return fmt.Errorf("hbctl rebalance apply: %w\n%s", err, out)
		}
		return nil
	}); err != nil {
		return target, time.Since(t0), err
	}
	return target, time.Since(t0), d.oneFence(ctx, meta, b)
}

// moveKilled moves bucket b from SET from to SET to as hbctl topology
// move does, its mover killed by a knob when the move reaches step; its
// pools close when it returns.
func (d *dev) moveKilled(ctx context.Context, b hongbao.Bucket, from, to, step string) error {
	op, err := move.OpenOperator(ctx, d.cfg.MetaDSN, d.cfg.CoreMembers(), d.cfg.Location(), time.Now)
	if err != nil {
		return err
	}
	defer op.Close()
	mv := op.Mover(1, 2500*time.Millisecond) // hbctl topology move's grace
	mv.Knobs.At = func(_ context.Context, s string) error {
		if s == step {
			return errKilled
		}
		return nil
	}
	return op.MoveBucket(ctx, mv, b, from, to)
}

// oneFence reports unless exactly one SET's fence holds bucket b: the
// SET the topology names.
func (d *dev) oneFence(ctx context.Context, meta *sql.DB, b hongbao.Bucket) error {
	t, err := topology.Load(ctx, meta)
	if err != nil {
		return err
	}
	owner := t.Owner(b).Name
	var holders []string
	for _, s := range t.Sets {
		db, err := sqldb.Open(s.MySQLDSN, 1)
		if err != nil {
			return err
		}
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		var n int
		err = db.QueryRowContext(c, "SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", s.Name, int(b)).Scan(&n)
		cancel()
		db.Close()
		if err != nil && !sqldb.IsMissingTable(err) {
			return fmt.Errorf("the fence of SET %s: %w", s.Name, err)
		}
		if n > 0 {
			holders = append(holders, s.Name)
		}
	}
	if len(holders) != 1 || holders[0] != owner {
		return fmt.Errorf("bucket %d: the topology names SET %s, the fences of %v hold it", b, owner, holders)
	}
	return nil
}
