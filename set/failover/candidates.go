package failover

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// stopReceiving lets each replica apply what the fenced old primary wrote
// (fenced: its position), stops every replica's receiving thread, and
// waits until each applied what it received. Unless the old primary was
// fenced, a replica that cannot be stopped refuses the failover: it might
// still acknowledge the old primary's commits. One that refuses the
// connection is down and acknowledges nothing.
func (f *op) stopReceiving(ctx context.Context, fenced string) ([]candidate, error) {
	if fenced != "" {
		f.receiveFinal(ctx, fenced)
	}
	var cands []candidate
	for _, r := range f.g.replicas {
		// A replica restarted and not started yet (--skip-slave-start)
		// holds what it acknowledged in its relay log only, and reports
		// no received position: its relay log is applied first.
		if err := f.applyStopped(ctx, r); err != nil {
			f.say("replica %s: its relay log: %v", sqldb.Addr(r), err)
		}
		var st replication.Status
		err := f.on(ctx, r, func(ctx context.Context, db *sql.DB) (err error) {
			if err := replication.StopIO(ctx, db); err != nil {
				return err
			}
			st, err = replication.ReplicaStatus(ctx, db)
			return err
		})
		switch {
		case err != nil && (fenced != "" || errors.Is(err, syscall.ECONNREFUSED)):
			f.say("replica %s is not a candidate: %v", sqldb.Addr(r), err)
			continue
		case err != nil:
			return nil, fmt.Errorf("replica %s does not answer (%w): it might still acknowledge the old primary's "+
				"commits, nothing was promoted; stop it (or make it unreachable from the old primary) and run failover again", sqldb.Addr(r), err)
		}
		// A replica that does not replicate from this primary (one
		// whose seed failed, left empty; an old primary never rejoined)
		// acknowledged none of its commits: promoting it would drop
		// them all (a chaos run on hosts did).
		if host, port, err := replication.Addr(f.g.primary); err != nil {
			return nil, err
		} else if !st.From(ctx, host, port) {
			f.say("replica %s is not a candidate: it does not replicate from the primary %s (its source: %s:%d)",
				sqldb.Addr(r), sqldb.Addr(f.g.primary), st.MasterHost, st.MasterPort)
			continue
		}
		received := st.IOPos
		if received == "" { // nothing received since its start: what it applied
			received = st.SlavePos
		}
		if err := f.waitApplied(ctx, r, received); err != nil {
			f.say("replica %s is not a candidate: %v", sqldb.Addr(r), err)
			continue
		}
		pos, err := replication.ParseState(received)
		if err != nil {
			return nil, err
		}
		f.say("replica %s received and applied up to GTID %q", sqldb.Addr(r), received)
		cands = append(cands, candidate{dsn: r, pos: pos, raw: received})
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("%s: no replica can be promoted (nothing was promoted)", f.g.name)
	}
	return cands, nil
}

// receiveFinal lets every replica that still receives from the fenced old
// primary apply its final position pos, all at once. One that does not
// receive (its link broken, its thread stopped) is not waited for: it
// will get nothing more, and what it lacks was acknowledged by another
// replica or by none.
func (f *op) receiveFinal(ctx context.Context, pos string) {
	var wg sync.WaitGroup
	for _, r := range f.g.replicas {
		wg.Go(func() {
			var st replication.Status
			if err := f.on(ctx, r, func(ctx context.Context, db *sql.DB) (err error) {
				st, err = replication.ReplicaStatus(ctx, db)
				return err
			}); err != nil || st.IORunning != "Yes" {
				return // stopReceiving says what it is
			}
			if err := f.waitApplied(ctx, r, pos); err != nil {
				f.say("replica %s: %v", sqldb.Addr(r), err)
			}
		})
	}
	wg.Wait()
}

// applyStopped applies the relay log of dsn's replica when both its
// threads are stopped (replication.ApplyIfStopped), within
// replication.wait_applied. A replica that does not answer is left to
// stopReceiving, which says what it is.
func (f *op) applyStopped(ctx context.Context, dsn string) error {
	d := f.cfg.WaitApplied.D()
	db, err := f.adminWait(dsn, d+dbTimeout)
	if err != nil {
		return err
	}
	defer db.Close()
	// A paused server accepts the connection and answers nothing.
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	err = db.PingContext(pctx)
	pcancel()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, d+2*dbTimeout)
	defer cancel()
	return replication.ApplyIfStopped(ctx, db)
}

// pick returns the most advanced candidate (the first of them when
// several received the same), or to, which must be as advanced.
func pick(cands []candidate, to string) (candidate, error) {
	best := cands[0]
	for _, c := range cands[1:] {
		if replication.Behind(best.pos, c.pos) {
			best = c
		}
	}
	if to == "" {
		return best, nil
	}
	for _, c := range cands {
		if c.dsn == to {
			if replication.Behind(c.pos, best.pos) {
				return candidate{}, fmt.Errorf("flag --to: %s received up to %q, %s more (%q): promoting it would lose transactions; nothing was promoted",
					sqldb.Addr(to), c.raw, sqldb.Addr(best.dsn), best.raw)
			}
			return c, nil
		}
	}
	return candidate{}, fmt.Errorf("flag --to: %s cannot be promoted (see above); nothing was promoted", sqldb.Addr(to))
}
