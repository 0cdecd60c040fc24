package move

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Recovery finishes, for one SET, the moves whose mover died. A
// rebalance's mover gives a bucket up on the source (commits the loss of
// its fence) and then publishes the new topology; if it dies between the
// two, the bucket has no owner. Every server of the source SET looks for
// such moves (Disowning, their lease run out) and finishes them: published
// when this SET's fence no longer has the bucket, sent back to catching up
// when it does (the mover's transaction was rolled back, the SET still
// serves the bucket). A fence row held by a live mover is left to it. It
// also deletes this SET's stale claims (RemoveStaleClaims): the claim a
// mover that died before the source's release left on its target.
type Recovery struct {
	metaDSN string
	core    []string
	db      *sql.DB
	set     string
	owner   func(hongbao.Bucket) string
	log     *zap.Logger
	// Every is the pause between rounds (default 1 s: a stuck move waited
	// out its mover's lease first, and every server of the SET runs a
	// round, each a read of the SET's fence and two of the journal);
	// after a failed round it doubles, up to MaxBackoff (default 5 s),
	// until a round succeeds.
	Every, MaxBackoff time.Duration
	// Now is the clock the journal's leases are judged with: a live
	// mover's lease was written with the mover's (nil: time.Now).
	Now func() time.Time
	// Core are the process's probes of the core group the meta database
	// lives on (nil: the meta pool's own).
	Core *sqldb.GroupProbes
	// Knobs are a test's hooks (zero: none).
	Knobs Knobs
}

// defaultRecoveryEvery is Recovery.Every when none is set.
const defaultRecoveryEvery = time.Second

// NewRecovery returns the recovery of SET set's interrupted moves: the
// meta database at metaDSN (its core group's members core), the SET's
// primary db, owner naming a bucket's SET as the server last saw the
// topology, and log for what it does and each failure.
func NewRecovery(metaDSN string, core []string, db *sql.DB, set string, owner func(hongbao.Bucket) string, log *zap.Logger) *Recovery {
	return &Recovery{metaDSN: metaDSN, core: core, db: db, set: set, owner: owner, log: log,
		Every: defaultRecoveryEvery, MaxBackoff: 5 * time.Second}
}

// Run runs rounds until ctx ends. It never stops for good on an error: a
// failed round (the meta database unreachable, a journal read refused) is
// logged and tried again after a backoff, the meta database opened again
// until it answers; recovery must outlive any outage of it.
func (r *Recovery) Run(ctx context.Context) {
	var meta *sql.DB
	defer func() {
		if meta != nil {
			meta.Close()
		}
	}()
	var j *topology.Journal
	every := r.Every
	if every <= 0 {
		every = defaultRecoveryEvery
	}
	delay := every
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		err := r.round(ctx, &meta, &j)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			delay = min(2*delay, max(r.MaxBackoff, every))
			r.log.Warn("finishing interrupted moves; trying again", zap.Error(err), zap.Duration("in", delay))
		default:
			delay = every
		}
	}
}

// clock is Now, or time.Now.
func (r *Recovery) clock() func() time.Time {
	if r.Now != nil {
		return r.Now
	}
	return time.Now
}

// round opens the meta database and its journal when they are not open
// yet, then finishes the stuck moves (Once) and removes stale claims.
func (r *Recovery) round(ctx context.Context, meta **sql.DB, j **topology.Journal) error {
	if *meta == nil {
		db, err := topology.OpenMeta(ctx, r.metaDSN, r.core, false, sqldb.ProbedBy(r.Core))
		if err != nil {
			return fmt.Errorf("meta DB: %w", err)
		}
		*meta = db
	}
	if *j == nil {
		jj, err := topology.NewJournal(ctx, *meta, r.clock())
		if err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		*j = jj
	}
	ferr := r.Once(ctx, *j)
	removed, cerr := r.RemoveStaleClaims(ctx, *meta)
	if len(removed) > 0 {
		r.log.Warn("stale claims deleted from this SET's fence: their mover died before the source gave the buckets up",
			zap.Ints("buckets", ints(removed)))
	}
	if cerr != nil {
		cerr = fmt.Errorf("removing stale claims: %w", cerr)
	}
	return errors.Join(ferr, cerr)
}

func ints(bs []hongbao.Bucket) []int {
	out := make([]int, len(bs))
	for i, b := range bs {
		out[i] = int(b)
	}
	return out
}

// Once finishes the moves from this SET that j has stuck at Disowning.
func (r *Recovery) Once(ctx context.Context, j *topology.Journal) error {
	stuck, err := j.Stuck(ctx, r.set)
	if err != nil {
		return err
	}
	for i := range stuck {
		m := &stuck[i]
		held, busy, err := fence.Holds(ctx, r.db, r.set, m.Bucket)
		switch {
		case err != nil:
			return err
		case busy:
			continue
		case held:
			if r.Knobs.AfterHolds != nil {
				r.Knobs.AfterHolds(m)
			}
			var back bool
			if back, err = j.RetryStuck(ctx, m); back || err != nil {
				r.log.Warn("interrupted move sent back: this SET still owns the bucket", zap.Int("bucket", int(m.Bucket)),
					zap.String("to", m.To), zap.Int64("rebalance", m.Rebalance), zap.Error(err))
			}
		default:
			var v int64
			v, err = j.Publish(ctx, m)
			r.log.Warn("interrupted move published for its mover", zap.Int("bucket", int(m.Bucket)), zap.String("to", m.To),
				zap.Int64("rebalance", m.Rebalance), zap.Int64("version", v), zap.Error(err))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
