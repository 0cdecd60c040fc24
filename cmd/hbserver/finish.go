package main

import (
	"context"
	"database/sql"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/cmd/internal/rebalance"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// finishMoves runs until ctx ends. A rebalance's mover gives a bucket up on
// the source (commits the loss of its fence) and then publishes the new
// topology; if it dies between the two, the bucket has no owner. Every
// half second the servers of the source SET look for such moves (Disowning,
// their lease run out) and finish them: published when this SET's fence no
// longer has the bucket, sent back to catching up when it does (the
// mover's transaction was rolled back, the SET still serves the bucket).
// A fence row held by a live mover is left to it. They also delete this
// SET's stale claims (rebalance.RemoveStaleClaims): the claim a mover that
// died before the source's release left on its target. The meta database
// is opened again until it answers: recovery must not stop for good on
// one failed start.
func finishMoves(ctx context.Context, metaDSN string, core []string, db *sql.DB, set string, owner func(hongbao.Bucket) string, log *zap.Logger) {
	var meta *sql.DB
	defer func() {
		if meta != nil {
			meta.Close()
		}
	}()
	var j *topology.Journal
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var err error
		if meta == nil {
			if meta, err = topology.OpenMeta(ctx, metaDSN, core, false); err != nil {
				log.Warn("finishing interrupted moves: meta DB; trying again", zap.Error(err))
				meta = nil
				continue
			}
		}
		if j == nil {
			if j, err = topology.NewJournal(ctx, meta, time.Now); err != nil {
				log.Warn("finishing interrupted moves: journal", zap.Error(err))
				continue
			}
		}
		if err := finishOnce(ctx, j, db, set, log); err != nil && ctx.Err() == nil {
			log.Warn("finishing interrupted moves", zap.Error(err))
		}
		removed, err := rebalance.RemoveStaleClaims(ctx, meta, db, set, owner)
		if len(removed) > 0 {
			log.Warn("stale claims deleted from this SET's fence: their mover died before the source gave the buckets up",
				zap.Ints("buckets", buckets(removed)))
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("removing stale claims", zap.Error(err))
		}
	}
}

func buckets(bs []hongbao.Bucket) []int {
	out := make([]int, len(bs))
	for i, b := range bs {
		out[i] = int(b)
	}
	return out
}

// afterHolds, when set (tests only), runs in finishOnce between the
// source's fence read and the move's retry: a mover resumes the move there.
var afterHolds func(*topology.Move)

func finishOnce(ctx context.Context, j *topology.Journal, db *sql.DB, set string, log *zap.Logger) error {
	stuck, err := j.Stuck(ctx, set)
	if err != nil {
		return err
	}
	for i := range stuck {
		m := &stuck[i]
		held, busy, err := fence.Holds(ctx, db, set, m.Bucket)
		switch {
		case err != nil:
			return err
		case busy:
			continue
		case held:
			if afterHolds != nil {
				afterHolds(m)
			}
			var back bool
			if back, err = j.RetryStuck(ctx, m); back || err != nil {
				log.Warn("interrupted move sent back: this SET still owns the bucket", zap.Int("bucket", int(m.Bucket)),
					zap.String("to", m.To), zap.Int64("rebalance", m.Rebalance), zap.Error(err))
			}
		default:
			var v int64
			v, err = j.Publish(ctx, m)
			log.Warn("interrupted move published for its mover", zap.Int("bucket", int(m.Bucket)), zap.String("to", m.To),
				zap.Int64("rebalance", m.Rebalance), zap.Int64("version", v), zap.Error(err))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
