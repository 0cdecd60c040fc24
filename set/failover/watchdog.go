package failover

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/metrics"
)

// Watchdog is hbwatch's set of watchers: the fixed groups it is given (the
// core group's) and one watcher per replicated SET of the topology,
// followed as the topology changes. A SET added at run time (hbctl set
// add, then a rebalance onto it), or given replicas, is watched from the
// next refresh on, without a restart; the watcher of a SET that left the
// topology, or has no replica left, stops.
type Watchdog struct {
	r     *Reparenter
	meta  *sql.DB // nil: the fixed groups only
	o     WatchOptions
	log   *zap.Logger
	m     *metrics.Watch
	fixed []*Watcher

	mu     sync.Mutex
	sets   map[string]*watching // by SET name
	synced bool                 // the topology was read once (or there is none)
}

// watching is one SET's watcher while it runs.
type watching struct {
	w      *Watcher
	cancel context.CancelFunc
}

// NewWatchdog returns a watchdog over the replicated SETs of meta's
// topology (meta nil: none) and the fixed watchers.
func (r *Reparenter) NewWatchdog(meta *sql.DB, o WatchOptions, log *zap.Logger, m *metrics.Watch, fixed ...*Watcher) *Watchdog {
	return &Watchdog{r: r, meta: meta, o: o, log: log, m: m, fixed: fixed, sets: map[string]*watching{}}
}

// Sync reads the topology and starts or stops SET watchers to match it;
// Run calls it every refresh. It returns the names of the SETs watched.
// Watchers it starts run under ctx, counted by wg.
func (d *Watchdog) Sync(ctx context.Context, wg *sync.WaitGroup) ([]string, error) {
	var names []string
	if d.meta != nil {
		var err error
		if names, err = ReplicatedSets(ctx, d.meta); err != nil {
			return nil, err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.synced = true
	for _, name := range names {
		if _, ok := d.sets[name]; ok {
			continue
		}
		wctx, cancel := context.WithCancel(ctx)
		w := d.r.NewWatcher(d.r.SetTarget(d.meta, name), d.o, d.log.With(zap.String("set", name)), d.m)
		d.sets[name] = &watching{w: w, cancel: cancel}
		wg.Go(func() { w.Run(wctx) })
		d.log.Info("watching a SET", zap.String("set", name))
	}
	for name, s := range d.sets {
		if !slices.Contains(names, name) {
			s.cancel() // a failover under way runs to its end first
			delete(d.sets, name)
			d.log.Info("no longer watching a SET: it left the topology or has no replica", zap.String("set", name))
		}
	}
	return names, nil
}

// Run runs every watcher until ctx ends, reading the topology every
// refresh, and returns once they all stopped.
func (d *Watchdog) Run(ctx context.Context, refresh time.Duration) {
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		d.log.Info("stopped")
	}()
	o := d.o
	d.log.Info("watching", zap.Int("fixed_groups", len(d.fixed)), zap.Bool("topology", d.meta != nil), zap.Duration("refresh", refresh),
		zap.Duration("after", o.After), zap.Duration("interval", o.Interval), zap.Duration("probe_timeout", o.ProbeTimeout),
		zap.Bool("accept_single_copy", o.SingleCopy))
	if o.SingleCopy {
		d.log.Warn("--accept-single-copy: an automatic failover that leaves the promoted primary without a replica lets it " +
			"acknowledge commits on one machine (asynchronous replication) until a replica connects")
	}
	for _, w := range d.fixed {
		wg.Go(func() { w.Run(ctx) })
	}
	tick := time.NewTicker(refresh)
	defer tick.Stop()
	for {
		if _, err := d.Sync(ctx, &wg); err != nil && ctx.Err() == nil {
			d.log.Warn("the topology's SETs could not be read: the watchers keep running", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Probed reports whether the topology was read and every watcher running
// ended a first round.
func (d *Watchdog) Probed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.synced {
		return false
	}
	for _, s := range d.sets {
		if !s.w.Probed() {
			return false
		}
	}
	for _, w := range d.fixed {
		if !w.Probed() {
			return false
		}
	}
	return true
}

// Watched names the SETs watched now.
func (d *Watchdog) Watched() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	names := make([]string, 0, len(d.sets))
	for name := range d.sets {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
