package replication

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Lag tells whether a replica is fit to serve reads: replicating, and
// caught up within max with what its primary had written, as last
// measured. Until measured, it is not.
//
// Seconds_Behind_Master alone cannot tell: it compares the event being
// applied with the clock, so a replica cut off by the network (its IO
// thread still "connected", waiting for events that never come, until
// slave_net_timeout) reads 0 while the primary writes on without it. So a
// measure also reads the primary's binary log position, then waits (at
// most max) on the replica until it applied that position: done in time,
// the replica held, within max, everything the primary had when it was
// read. A primary that wrote nothing the replica lacks passes at once.
type Lag struct {
	primary, replica *sql.DB
	max              time.Duration
	ok               atomic.Bool
}

// NewLag returns the Lag of the replica on replica, following the primary
// on primary; Run measures it.
func NewLag(primary, replica *sql.DB, max time.Duration) *Lag {
	return &Lag{primary: primary, replica: replica, max: max}
}

// Fresh reports the last measure: true when the replica had applied,
// within max, what the primary had written when it was measured (reads
// may trail the primary by up to max plus Run's interval). Safe for
// concurrent use.
func (l *Lag) Fresh() bool { return l.ok.Load() }

// Run measures the replica every interval until ctx ends. A measure that
// fails (the replica or the primary down, or the replica's DSN now names a
// primary, which has no replication status) makes it unfit until one
// succeeds.
func (l *Lag) Run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		l.ok.Store(l.measure(ctx, every) == nil)
		select {
		case <-ctx.Done():
			l.ok.Store(false)
			return
		case <-tick.C:
		}
	}
}

// errBehind is a replica that has not applied the primary's position
// within max.
var errBehind = errors.New("replication: the replica did not apply the primary's position in time")

// measure returns nil when the replica is fit: both its threads running
// within max by its own account, and it applied the primary's binary log
// position, read first, within max.
func (l *Lag) measure(ctx context.Context, every time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, l.max+every)
	defer cancel()
	st, err := ReplicaStatus(ctx, l.replica)
	if err != nil {
		return err
	}
	if !st.Fresh(l.max) {
		return fmt.Errorf("replication: replica IO %s, SQL %s, %s behind: %w", st.IORunning, st.SQLRunning, st.Lag, errBehind)
	}
	pos, err := BinlogPos(ctx, l.primary)
	if err != nil {
		return err
	}
	var done sql.NullInt64
	if err := l.replica.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", pos, l.max.Seconds()).Scan(&done); err != nil {
		return fmt.Errorf("replication: wait for %s: %w", pos, err)
	}
	if !done.Valid || done.Int64 != 0 {
		return fmt.Errorf("position %s: %w", pos, errBehind)
	}
	return nil
}
