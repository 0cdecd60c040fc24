package failover

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// A failover run again never promotes a second replica (issue 23,
// finding 5; topology/promotion.go has the argument): before promoting, a
// failover records the replica it promotes in the meta database, and a
// run from the same primary that finds the record resumes it.

// recordPromotion runs the promote step's checks (step) and records that
// this failover promotes to (a compare-and-set on the primary it started
// from and on any other promotion of it).
func (f *op) recordPromotion(ctx context.Context, to string) error {
	if err := f.step(ctx, StepPromote); err != nil {
		return err
	}
	if f.g.record == nil {
		return nil
	}
	if err := f.g.record(ctx, to); err != nil {
		return fmt.Errorf("%s: nothing was promoted: %w", f.g.name, err)
	}
	return nil
}

// resume finishes a failover from the group's primary that promoted a
// replica and did not publish it: it fences the old primary again where
// it answers, promotes the recorded replica again (the same settings; it
// also finishes a promotion cut short), repoints the other replicas and
// publishes it. resumed is false when there is nothing to resume. When
// the recorded replica still replicates (the earlier run died before
// promoting it), the failover goes on as usual with it as --to: it is
// the only replica this primary's failovers may promote.
func (f *op) resume(ctx context.Context, o *Options, began time.Time) (resumed bool, err error) {
	if f.g.promoted == nil {
		return false, nil
	}
	to, ok, err := f.g.promoted(ctx)
	if err != nil || !ok {
		return false, err
	}
	if o.To != "" && o.To != to {
		return false, UsageError{fmt.Sprintf("flag --to: a failover from %s promoted %s and did not publish it: "+
			"promoting %s as well would make two primaries; run failover without --to, it publishes %s",
			sqldb.Addr(f.g.primary), sqldb.Addr(to), sqldb.Addr(o.To), sqldb.Addr(to))}
	}
	if !slices.Contains(f.g.replicas, to) {
		return false, fmt.Errorf("%s: a failover promoted %s, which is no longer one of its replicas; nothing was done", f.g.name, sqldb.Addr(to))
	}
	var st replication.Status
	var pos string
	if err := f.on(ctx, to, func(ctx context.Context, db *sql.DB) (err error) {
		if st, err = replication.ReplicaStatus(ctx, db); err != nil {
			return err
		}
		pos, err = replication.BinlogPos(ctx, db)
		return err
	}); err != nil {
		return false, fmt.Errorf("%s: a failover promoted %s and did not publish it; it does not answer (%w): "+
			"nothing was done (no other replica may be promoted while it may be writable); if it is lost for good "+
			"(stopped, never to run again), delete its record (DELETE FROM promotions WHERE set_name = '%s' in the meta "+
			"database) and run failover again", f.g.name, sqldb.Addr(to), err, strings.TrimPrefix(f.g.name, "SET "))
	}
	if st.Configured {
		f.say("a failover from %s chose %s and died before promoting it: failing over to it", sqldb.Addr(f.g.primary), sqldb.Addr(to))
		o.To = to
		return false, nil
	}
	f.say("a failover from %s promoted %s and did not publish it: publishing it (no other replica is promoted)", sqldb.Addr(f.g.primary), sqldb.Addr(to))
	if err := f.step(ctx, StepFence); err != nil {
		return true, err
	}
	if _, err := f.fenceOld(ctx); err != nil {
		return true, err
	}
	others := slices.DeleteFunc(slices.Clone(f.g.replicas), func(r string) bool { return r == to })
	if err := f.recordPromotion(ctx, to); err != nil {
		return true, err
	}
	if err := f.promote(ctx, candidate{dsn: to, raw: pos}, len(others) == 0 && o.SingleCopy); err != nil {
		return true, err
	}
	return true, f.finish(ctx, to, others, *o, began)
}
