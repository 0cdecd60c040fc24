package main

import (
	"context"
	"database/sql"
	"time"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/router/topology"
	"github.com/hongbao-dev/hongbao/schema"
)

// finishMoves runs until ctx ends. A rebalance's mover gives a bucket up on
// the source (commits the loss of its fence) and then publishes the new
// topology; if it dies between the two, the bucket has no owner. Every
// half second the servers of the source SET look for such moves (Disowning,
// their lease run out) and finish them: published when this SET's fence no
// longer has the bucket, sent back to catching up when it does (the
// mover's transaction was rolled back, the SET still serves the bucket).
// A fence row held by a live mover is left to it.
func finishMoves(ctx context.Context, metaDSN string, core []string, db *sql.DB, set string, log *zap.Logger) {
	meta, err := topology.OpenMeta(ctx, metaDSN, core, false)
	if err != nil {
		log.Error("finishing interrupted moves: meta DB", zap.Error(err))
		return
	}
	defer meta.Close()
	var j *topology.Journal
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
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
	}
}

func finishOnce(ctx context.Context, j *topology.Journal, db *sql.DB, set string, log *zap.Logger) error {
	stuck, err := j.Stuck(ctx, set)
	if err != nil {
		return err
	}
	for i := range stuck {
		m := &stuck[i]
		held, busy, err := schema.Holds(ctx, db, set, m.Bucket)
		switch {
		case err != nil:
			return err
		case busy:
			continue
		case held:
			err = j.Retry(ctx, m)
			log.Warn("interrupted move sent back: this SET still owns the bucket", zap.Int("bucket", int(m.Bucket)),
				zap.String("to", m.To), zap.Int64("rebalance", m.Rebalance), zap.Error(err))
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
