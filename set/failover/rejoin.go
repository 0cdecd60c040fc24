package failover

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// rejoinAll makes every replica of the SET that does not replicate from its
// primary a replica of it.
func (f *op) rejoinAll(ctx context.Context) error {
	if len(f.g.replicas) == 0 {
		return fmt.Errorf("%s has no replicas", f.g.name)
	}
	if err := f.noPendingPromotion(ctx); err != nil {
		return err
	}
	host, port, err := replication.Addr(f.g.primary)
	if err != nil {
		return err
	}
	var failed []string
	for _, r := range f.g.replicas {
		var st replication.Status
		if err := f.on(ctx, r, func(ctx context.Context, db *sql.DB) (err error) {
			st, err = replication.ReplicaStatus(ctx, db)
			return err
		}); err != nil {
			failed = append(failed, fmt.Sprintf("%s: not reachable (%v): start it, then run rejoin again", sqldb.Addr(r), err))
			continue
		}
		if st.From(ctx, host, port) && st.IORunning == "Yes" && st.SQLRunning == "Yes" {
			f.say("%s already replicates from %s", sqldb.Addr(r), sqldb.Addr(f.g.primary))
			continue
		}
		if st.From(ctx, host, port) {
			if err := f.restart(ctx, r); err != nil {
				failed = append(failed, fmt.Sprintf("%s: %v", sqldb.Addr(r), err))
			}
			continue
		}
		if err := f.rejoin(ctx, r); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", sqldb.Addr(r), err))
		}
	}
	if len(failed) < len(f.g.replicas) {
		// A replica follows: a primary promoted with --accept-single-copy
		// waits for acknowledgements again, even if it loses it later.
		if err := f.on(ctx, f.g.primary, func(ctx context.Context, db *sql.DB) error {
			return replication.WaitNoReplica(ctx, db, true)
		}); err != nil {
			failed = append(failed, fmt.Sprintf("the primary %s: %v", sqldb.Addr(f.g.primary), err))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("rejoin of %s:\n  %s", f.g.name, strings.Join(failed, "\n  "))
	}
	return nil
}

// rejoin fences the server of dsn, refuses when it has errant
// transactions, and makes it a replica of the SET's primary.
func (f *op) rejoin(ctx context.Context, dsn string) error {
	db, err := f.admin(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	pdb, err := f.admin(f.g.primary)
	if err != nil {
		return err
	}
	defer pdb.Close()
	ctx, cancel := context.WithTimeout(ctx, 4*dbTimeout)
	defer cancel()
	if err := f.drain(ctx, db); err != nil {
		return err
	}
	// Its binary log is read before the fence too: an old primary that was
	// paused holds commits waiting for a semi-sync acknowledgement nobody
	// sends, and SET GLOBAL read_only waits behind them (the fence times
	// out); its errant transactions are named all the same.
	mine, err := replication.BinlogState(ctx, db)
	if err != nil {
		return fmt.Errorf("not reachable (%w): start it, then run rejoin again", err)
	}
	theirs, err := replication.BinlogState(ctx, pdb)
	if err != nil {
		return fmt.Errorf("the primary %s: %w", sqldb.Addr(f.g.primary), err)
	}
	fenced, fenceErr := replication.Fence(ctx, db, f.g.apps)
	if fenceErr == nil && !fenced.Final {
		fenceErr = fmt.Errorf("%d commit(s) wait there for a semi-sync acknowledgement", fenced.Waiting)
	}
	if fenceErr == nil {
		if mine, err = replication.BinlogState(ctx, db); err != nil {
			return err
		}
	}
	if errant := replication.Errant(mine, theirs); len(errant) > 0 {
		fenced := "it stays read-only"
		if fenceErr != nil {
			fenced = fmt.Sprintf("it could not be fenced (%v: commits there wait for a semi-sync acknowledgement); "+
				"it is out of the topology, stop it", fenceErr)
		}
		return fmt.Errorf("refused: it has transactions the primary %s lacks (errant: never acknowledged, unless by a replica that missed a failover): %s; "+
			"%s: rebuild it from the primary (a fresh copy), it must not replicate",
			sqldb.Addr(f.g.primary), replication.List(errant, 20), fenced)
	}
	if fenceErr != nil {
		return fmt.Errorf("not fenced (%w): start it, then run rejoin again", fenceErr)
	}
	host, port, err := replication.Addr(f.g.primary)
	if err != nil {
		return err
	}
	if err := replication.Follow(ctx, db, replication.Source{Host: host, Port: port, User: f.cfg.User, Password: f.cfg.Password}, true); err != nil {
		return err
	}
	return f.replicating(ctx, db, dsn)
}

// replicating finishes making dsn's server (db) a replica: its semi-sync
// timeout for when it is promoted, its application accounts unlocked (a
// fence or a rejoin cut short after its fence locked them: the application
// reads from replicas), and it waits until it replicates.
func (f *op) replicating(ctx context.Context, db *sql.DB, dsn string) error {
	if err := replication.SetTimeout(ctx, db, f.cfg.SemiSyncTimeout.D()); err != nil {
		return err
	}
	if err := replication.Unlock(ctx, db, f.g.apps); err != nil {
		return err
	}
	return f.waitReplicating(ctx, db, dsn)
}

// waitReplicating waits until dsn's server (db) replicates from the
// group's primary, both threads running, within ctx.
func (f *op) waitReplicating(ctx context.Context, db *sql.DB, dsn string) error {
	for ctx.Err() == nil {
		st, err := replication.ReplicaStatus(ctx, db)
		if err != nil {
			return err
		}
		if st.IORunning == "Yes" && st.SQLRunning == "Yes" {
			f.say("%s replicates from %s (read-only), from GTID %q", sqldb.Addr(dsn), sqldb.Addr(f.g.primary), st.SlavePos)
			return nil
		}
		if st.LastError != "" && st.IORunning == "No" {
			return fmt.Errorf("replication does not start: %s", st.LastError)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("replication did not start within %v", 4*dbTimeout)
}
