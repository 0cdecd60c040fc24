package failover

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Why a replica never resumes acknowledging a primary that was failed
// away from (issue 23, finding 3). A replica that missed a failover (down,
// refusing connections, when its receiving thread was to be stopped; or
// restarted between that stop and its repointing) still has the old
// primary configured. Were it to start replicating by itself when its
// mysqld starts, it would acknowledge the old primary's commits, which an
// unfenced old primary (paused, or cut off from hbctl only) then answers
// to its clients: acknowledged money the promoted replica lacks. So no
// member starts replicating by itself (replication.SkipSlaveStart), and
// replication is started only here, by hbctl set rejoin (core rejoin),
// under the group's failover lock and against the published topology:
// a replica whose source is the published primary is started again
// (restart); one whose source is anything else is fenced, checked for
// errant transactions and repointed (rejoin). scripts/dev.sh runs rejoin
// as the startup step of every start.

// restart starts replication again on dsn's server, a replica of the
// group's primary whose threads are stopped (a restarted replica).
func (f *op) restart(ctx context.Context, dsn string) error {
	db, err := f.admin(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 4*dbTimeout)
	defer cancel()
	if err := replication.Resume(ctx, db, dbTimeout); err != nil {
		return err
	}
	return f.replicating(ctx, db, dsn)
}

// noPendingPromotion refuses a rejoin while a failover from the group's
// primary promoted a replica and did not publish it: starting the other
// replicas again from that primary would let it acknowledge commits the
// promoted one lacks; the failover run again finishes first.
func (f *op) noPendingPromotion(ctx context.Context) error {
	if f.g.promoted == nil {
		return nil
	}
	to, ok, err := f.g.promoted(ctx)
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("%s: a failover from %s promoted %s and did not publish it: run the failover again "+
			"(it publishes %s); nothing was rejoined", f.g.name, sqldb.Addr(f.g.primary), sqldb.Addr(to), sqldb.Addr(to))
	}
	return nil
}

// drainWait bounds drain's wait for the relay log to be applied (within
// the admin connection's read timeout).
const drainWait = 3 * time.Second

// drain stops the receiving thread of db's server, when it is a replica,
// and lets it apply everything it received: rejoin compares its binary
// log with the primary's and then resets its relay log, so a commit it
// received (and acknowledged: an old primary's, after a failover it
// missed) must be in the binary log to be named as errant rather than
// dropped without a word. The applier is started before the receiver is
// stopped: MariaDB, replicating by GTID, discards the relay log when it
// starts replicating with both threads stopped. A replica found with both
// stopped (restarted, not started yet) has its relay log applied outside
// GTID mode (replication.ApplyIfStopped).
func (f *op) drain(ctx context.Context, db *sql.DB) error {
	st, err := replication.ReplicaStatus(ctx, db)
	if err != nil {
		return fmt.Errorf("not reachable (%w): start it, then run rejoin again", err)
	}
	if !st.Configured {
		return nil
	}
	if st.IORunning == "No" && st.SQLRunning == "No" {
		if err := replication.ApplyIfStopped(ctx, db); err != nil {
			return fmt.Errorf("refused: its relay log could not be applied (%w); look at its SHOW SLAVE STATUS, then run rejoin again", err)
		}
		return nil
	}
	if st.SQLRunning != "Yes" {
		if _, err := db.ExecContext(ctx, "START SLAVE SQL_THREAD"); err != nil {
			return fmt.Errorf("replication: start sql thread: %w", err)
		}
	}
	if err := replication.StopIO(ctx, db); err != nil {
		return err
	}
	if st, err = replication.ReplicaStatus(ctx, db); err != nil || st.IOPos == "" {
		return err
	}
	if err := replication.WaitApplied(ctx, db, st.IOPos, drainWait); err != nil {
		return fmt.Errorf("refused: it did not apply what it received (%w): what it received might be lost by a repointing; "+
			"look at its SHOW SLAVE STATUS, then run rejoin again", err)
	}
	return nil
}
