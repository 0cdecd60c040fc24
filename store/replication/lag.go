package replication

import (
	"context"
	"database/sql"
	"sync/atomic"
	"time"
)

// Lag tells whether a replica is fit to serve reads: replicating, at most
// max behind its primary, as last measured. Until measured, it is not.
type Lag struct {
	db  *sql.DB
	max time.Duration
	ok  atomic.Bool
}

// NewLag returns the Lag of the replica on db; Run measures it.
func NewLag(db *sql.DB, max time.Duration) *Lag { return &Lag{db: db, max: max} }

// Fresh reports the last measure: true when the replica replicated within
// max. Safe for concurrent use.
func (l *Lag) Fresh() bool { return l.ok.Load() }

// Run measures the replica every interval until ctx ends. A measure that
// fails (the replica down, or the DSN now names a primary, which has no
// replication status) makes it unfit until one succeeds.
func (l *Lag) Run(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		l.measure(ctx, every)
		select {
		case <-ctx.Done():
			l.ok.Store(false)
			return
		case <-tick.C:
		}
	}
}

func (l *Lag) measure(ctx context.Context, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := ReplicaStatus(ctx, l.db)
	l.ok.Store(err == nil && st.Fresh(l.max))
}
