package topology

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
)

// Watcher follows the topology in the meta database: it polls the version
// and reloads the map when it changes, so routers and servers follow a
// move without a restart.
type Watcher struct {
	meta     *sql.DB
	interval time.Duration
	log      *zap.Logger
	cur      atomic.Pointer[Map]
	// lastForced rate-limits refreshes forced by misses (unix nanos).
	lastForced atomic.Int64
	lastOK     atomic.Int64 // unix nanos of the last poll that reached the meta DB
	moved      atomic.Int64 // buckets seen changing SET since start
}

// LastRefresh is when the watcher last read the version from the meta
// database: a stale one means the topology is unreachable.
func (w *Watcher) LastRefresh() time.Time { return time.Unix(0, w.lastOK.Load()) }

// Moved is how many buckets the watcher saw change SET since it started.
func (w *Watcher) Moved() int64 { return w.moved.Load() }

// NewWatcher loads the current topology. Call Run to follow changes.
func NewWatcher(ctx context.Context, meta *sql.DB, interval time.Duration, log *zap.Logger) (*Watcher, error) {
	w := &Watcher{meta: meta, interval: interval, log: log}
	if err := w.Refresh(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// Current returns the latest topology seen.
func (w *Watcher) Current() *Map { return w.cur.Load() }

// Refresh reloads the topology if its version changed.
func (w *Watcher) Refresh(ctx context.Context) error {
	var version int64
	if err := w.meta.QueryRowContext(ctx, "SELECT version FROM version WHERE id = 1").Scan(&version); err != nil {
		return fmt.Errorf("topology: poll: %w", err)
	}
	w.lastOK.Store(time.Now().UnixNano())
	if cur := w.cur.Load(); cur != nil && cur.Version == version {
		return nil
	}
	t, err := Load(ctx, w.meta)
	if err != nil {
		return err
	}
	for { // never step back to an older version loaded concurrently
		old := w.cur.Load()
		if old != nil && old.Version >= t.Version {
			return nil
		}
		if w.cur.CompareAndSwap(old, t) {
			if old != nil {
				w.moved.Add(int64(Moves(old, t)))
				w.log.Info("topology changed", zap.Int64("from", old.Version), zap.Int64("to", t.Version))
			}
			return nil
		}
	}
}

// Owns returns a check that SET name owns a bucket. A miss refreshes the
// topology first (at most every 100 ms), so a server that just received a
// bucket does not refuse it until its next poll.
func (w *Watcher) Owns(name string) func(hongbao.Bucket) bool {
	return func(b hongbao.Bucket) bool {
		if w.Current().Owner(b).Name == name {
			return true
		}
		w.refreshSoon(context.Background())
		return w.Current().Owner(b).Name == name
	}
}

// Recheck returns a check that refreshes the topology (rate-limited) before
// asking whether SET name owns a bucket: for a packet that was not found,
// which may mean its bucket just moved away. The refresh ends with ctx (the
// request's): a caller that gave up or ran out of time waits no more, and
// the answer is then the topology already known.
func (w *Watcher) Recheck(name string) func(context.Context, hongbao.Bucket) bool {
	return func(ctx context.Context, b hongbao.Bucket) bool {
		w.refreshSoon(ctx)
		return w.Current().Owner(b).Name == name
	}
}

// refreshSoon refreshes the topology within ctx and at most a second,
// unless another refresh was forced in the last 100 ms. A ctx already
// ended takes no turn: the next miss may refresh at once.
func (w *Watcher) refreshSoon(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	now := time.Now().UnixNano()
	last := w.lastForced.Load()
	if now-last < int64(100*time.Millisecond) || !w.lastForced.CompareAndSwap(last, now) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := w.Refresh(ctx); err != nil && !errors.Is(err, context.Canceled) {
		w.log.Warn("topology refresh failed", zap.Error(err))
	}
}

// refreshTimeout bounds one poll of Run: a connection to the meta
// database cut by the network (silent, not closed) would hold a poll, and
// the watcher with it, until TCP gives up (many minutes), long after the
// meta database is reachable again on a new connection.
const refreshTimeout = 5 * time.Second

// Run polls until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := w.poll(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("topology refresh failed; keeping the last one", zap.Error(err))
			}
		}
	}
}

func (w *Watcher) poll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	return w.Refresh(ctx)
}

// FollowSet calls fn with SET name as each new version of the topology
// describes it (looked at every 100 ms), until ctx ends: a SET's servers
// and settler follow its MySQL primary through a failover this way.
func (w *Watcher) FollowSet(ctx context.Context, name string, fn func(Set)) {
	w.Follow(ctx, func(m *Map) {
		if s, ok := m.Set(name); ok {
			fn(*s)
		}
	})
}

// Follow calls fn with each new version of the topology (looked at every
// 100 ms), until ctx ends.
func (w *Watcher) Follow(ctx context.Context, fn func(*Map)) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	seen := int64(-1)
	for {
		if m := w.Current(); m.Version != seen {
			seen = m.Version
			fn(m)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
