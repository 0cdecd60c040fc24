package failover

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// The watchdog: hbwatch, hbctl set watch and hbctl core watch fail a replicated
// group over automatically, with exactly the code of hbctl set failover
// (Reparenter.Failover), when its primary is dead. Every interval it probes the
// primary the meta database (or, for the core group, the failover epoch)
// names, and each replica's SHOW SLAVE STATUS. It declares the primary
// dead only when all of these hold:
//
//   - the watcher has failed to reach it (a fresh connection and SELECT 1
//     within the probe timeout) continuously for --after;
//   - at least one reachable replica that replicates from it says it has
//     lost it (Slave_IO_Running not Yes: No or Connecting, with its last
//     IO error), and no reachable replica still receives from it
//     (Slave_IO_Running Yes): a watcher cut off from the primary by its
//     own network sees a replica still replicating and does nothing;
//   - the primary was seen alive since it became the primary, as a
//     semi-sync primary that can acknowledge no commit no replica has
//     (semi-sync master on, AFTER_SYNC, wait_no_slave on, a timeout of
//     "forever": replication.Unacknowledged);
//   - the group is armed: every replica it lists was seen replicating
//     from this primary since it became the primary. This is the rule
//     against flapping: after a failover the old primary is listed among
//     the replicas and replicates from nobody until hbctl set rejoin (or
//     a fresh copy), so the group is not failed over automatically again
//     until then; a watcher that starts arms itself the same way.
//
// Why the old primary cannot acknowledge a commit after the promotion.
// A commit is acknowledged to a client only after a replica has it in its
// relay log (AFTER_SYNC, waiting forever, also with no replica connected:
// checked on the primary while it answered). A failover first fences
// the old primary where it answers (read_only, connections killed); where
// it does not, it stops the receiving thread of every replica the group
// lists, and refuses to promote anything when a replica it cannot reach
// might still be connected to the old primary (one refusing connections
// is down). From then on no server acknowledges the old primary's
// commits (a replica the group does not list must never be a semi-sync
// replica: nobody would stop it), so a primary that is only unreachable from here, or paused
// and resumed later, holds its commits in its binary log forever and
// answers none: they become errant transactions that rejoin names. The
// promoted replica received every acknowledged commit and applied it
// before turning writable; servers and settlers follow the new topology
// version (for the core group, the higher failover epoch) and never go
// back. A configured semi-sync timeout (degrade) would let a cut-off old
// primary commit alone, so the watcher refuses to run with one.
//
// A SET's failover takes the SET's failover lock in the meta database
// (topology.LockFailover, as hbctl set failover and rejoin do) and
// re-reads the SET under it: an operator's failover meanwhile leaves
// nothing to do. The core group has no database above it for such a
// lock: its lock is taken on the core members themselves (corelock.go),
// by hbctl core failover and rejoin and by the core watcher's failover.

// Target is a replicated group a watcher guards.
type Target struct {
	Name  string                                    // for messages: "SET b", "the core group"
	Label string                                    // for metrics: the SET's name, "core"
	Fix   string                                    // the operator's command when the watcher gives up
	Load  func(ctx context.Context) (*Group, error) // the group as it stands now
	// Lock, when set, excludes every other failover or rejoin of the
	// group (an operator's) until released; the failover checks it
	// before each step.
	Lock func(ctx context.Context) (HeldLock, error)
}

// WatchOptions tune a watcher.
type WatchOptions struct {
	After        time.Duration // how long the primary must be unreachable
	Interval     time.Duration // time between probes
	ProbeTimeout time.Duration // bound of one probe (dial, SELECT 1)
	SingleCopy   bool          // --accept-single-copy, passed to the failover
}

// Watcher guards one group. Its state is about the primary it watches
// and is forgotten when another becomes the primary; only Run's
// goroutine touches it, but for probed.
type Watcher struct {
	t   Target
	r   *Reparenter // its failovers: their steps go to the log
	o   WatchOptions
	log *zap.Logger
	m   *metrics.Watch

	probed atomic.Bool // a first round ended

	primary   string          // DSN of the primary watched; "" before the first round
	downSince time.Time       // when the current streak of failed probes began; zero: it answered last
	known     bool            // the primary answered since it became the primary
	unsafe    string          // why the primary, as last seen, could acknowledge a commit no replica has; "": it cannot
	seen      map[string]bool // replicas seen replicating from the primary since it became the primary
	armed     bool            // every replica was seen replicating from it
	promoted  bool            // this watcher promoted the current primary
	halted    string          // an automatic failover of this primary failed: why
	last      string          // the last decision logged in this streak
}

// NewWatcher returns a watcher of t logging to log (with the group's
// name) and measuring to m (nil: no metrics). Its failovers are r's, with
// their steps logged.
func (r *Reparenter) NewWatcher(t Target, o WatchOptions, log *zap.Logger, m *metrics.Watch) *Watcher {
	rr := *r
	rr.Progress = func(line string) { log.Info(line) }
	return &Watcher{t: t, r: &rr, o: o, log: log, m: m}
}

// Probed reports whether the watcher ended a first round: it read the
// group and probed it once.
func (w *Watcher) Probed() bool { return w.probed.Load() }

// Run probes every interval until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	tick := time.NewTicker(w.o.Interval)
	defer tick.Stop()
	for {
		w.round(ctx)
		w.probed.Store(true)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// round probes the primary and the replicas once, and fails the group
// over when the primary is dead (see the rule above).
func (w *Watcher) round(ctx context.Context) {
	g, err := w.t.Load(ctx)
	if err != nil {
		w.m.Probed(w.t.Label, false, time.Now())
		w.decide("cannot read "+w.t.Name+" (no decision this round)", zap.Error(err))
		return
	}
	if g.primary != w.primary {
		w.newPrimary(g)
	}
	perr := w.probePrimary(ctx, g.primary)
	w.m.Probed(w.t.Label, perr == nil, time.Now())
	reps := w.probeReplicas(ctx, g)
	w.arm(g, reps)
	if ctx.Err() != nil {
		return
	}
	if perr == nil {
		if !w.downSince.IsZero() {
			w.log.Info("the primary answers again: the streak of failed probes ends, no failover",
				zap.String("primary", sqldb.Addr(g.primary)), zap.Duration("unreachable_for", time.Since(w.downSince).Round(time.Millisecond)))
		}
		w.downSince, w.last = time.Time{}, ""
		return
	}
	if w.downSince.IsZero() {
		w.downSince = time.Now()
		w.log.Warn("the primary does not answer: a streak of failed probes begins",
			zap.String("primary", sqldb.Addr(g.primary)), zap.Duration("after", w.o.After), zap.Error(perr))
	}
	down := time.Since(w.downSince)
	if down < w.o.After {
		return
	}
	why, ok := w.dead(g, reps)
	if !ok {
		w.decide("the primary does not answer, no failover: "+why, zap.String("primary", sqldb.Addr(g.primary)),
			zap.Duration("unreachable_for", down.Round(time.Millisecond)), zap.Error(perr))
		return
	}
	w.failover(ctx, g, down, why)
}

// newPrimary starts watching the group's current primary afresh.
func (w *Watcher) newPrimary(g *Group) {
	if w.promoted {
		w.log.Warn("disarmed after the automatic failover (no flapping): no automatic failover of "+w.t.Name+
			" until every replica replicates from the new primary ("+g.rejoinCmd+")",
			zap.String("primary", sqldb.Addr(g.primary)), zap.Strings("replicas", addrs(g.replicas)))
	} else {
		w.log.Info("watching "+w.t.Name, zap.String("primary", sqldb.Addr(g.primary)), zap.Strings("replicas", addrs(g.replicas)))
	}
	w.primary, w.downSince, w.known, w.unsafe = g.primary, time.Time{}, false, ""
	w.seen, w.armed, w.promoted, w.halted, w.last = map[string]bool{}, false, false, "", ""
}

// decide logs a decision once per streak of failed probes (or until the
// next different one).
func (w *Watcher) decide(msg string, fields ...zap.Field) {
	if msg == w.last {
		return
	}
	w.last = msg
	w.log.Warn(msg, fields...)
}

// probePrimary connects to the primary afresh and runs SELECT 1 within
// the probe timeout; when it answers it also reads whether it could
// acknowledge a commit that no replica has.
func (w *Watcher) probePrimary(ctx context.Context, dsn string) error {
	var unsafe string
	err := w.probe(ctx, dsn, func(ctx context.Context, db *sql.DB) error {
		var one int
		if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
			return err
		}
		var err error
		unsafe, err = replication.Unacknowledged(ctx, db)
		return err
	})
	if err != nil {
		return err
	}
	if unsafe != w.unsafe || !w.known {
		if unsafe != "" {
			w.log.Warn("the primary could acknowledge commits no replica has: no automatic failover while it is so",
				zap.String("primary", sqldb.Addr(dsn)), zap.String("why", unsafe))
		}
	}
	w.known, w.unsafe = true, unsafe
	return nil
}

// replicaView is what the watcher saw of a replica this round.
type replicaView struct {
	dsn   string
	state string // replicating, lost (its primary), elsewhere (not a replica of this primary), unreachable
	what  string // for messages
}

// Replica states.
const (
	replicating = "replicating"
	lost        = "lost"
	elsewhere   = "elsewhere"
	unreachable = "unreachable"
)

// probeReplicas reads each replica's replication status.
func (w *Watcher) probeReplicas(ctx context.Context, g *Group) []replicaView {
	views := make([]replicaView, 0, len(g.replicas))
	for _, r := range g.replicas {
		st, err := w.replicaStatus(ctx, r)
		views = append(views, viewOf(ctx, g.primary, r, st, err))
	}
	return views
}

// viewOf classifies replica r of primary by its replication status st
// (err: it could not be read).
func viewOf(ctx context.Context, primary, r string, st replication.Status, err error) replicaView {
	v := replicaView{dsn: r}
	host, port, aerr := replication.Addr(primary)
	switch {
	case aerr != nil || err != nil:
		v.state, v.what = unreachable, fmt.Sprint(errors.Join(aerr, err))
	case !st.From(ctx, host, port): // by address: a replica set up by name is the same
		v.state, v.what = elsewhere, fmt.Sprintf("does not replicate from it (source %s:%d)", st.MasterHost, st.MasterPort)
	case st.IORunning == "Yes":
		v.state, v.what = replicating, "receives from it (Slave_IO_Running Yes)"
	default:
		v.state, v.what = lost, fmt.Sprintf("lost it (Slave_IO_Running %s: %s)", st.IORunning, st.LastError)
	}
	return v
}

// replicaStatus reads dsn's SHOW SLAVE STATUS within the probe timeout.
func (w *Watcher) replicaStatus(ctx context.Context, dsn string) (st replication.Status, err error) {
	err = w.probe(ctx, dsn, func(ctx context.Context, db *sql.DB) error {
		st, err = replication.ReplicaStatus(ctx, db)
		return err
	})
	return st, err
}

// probe runs fn on a fresh connection to dsn (as the operator), all of it
// within the probe timeout: a watcher must see a server as it is now, not
// through a pooled connection that outlived it.
func (w *Watcher) probe(ctx context.Context, dsn string, fn func(context.Context, *sql.DB) error) error {
	d := w.o.ProbeTimeout
	db, err := w.r.adminTimeouts(dsn, d, d, d)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return fn(ctx, db)
}

// arm records the replicas seen replicating from the primary and arms
// the watcher once every replica was, and the primary was seen safe.
func (w *Watcher) arm(g *Group, reps []replicaView) {
	for _, v := range reps {
		if v.state == replicating {
			w.seen[v.dsn] = true
		}
	}
	armed := w.known && w.unsafe == "" && len(w.unseen(g)) == 0
	if armed && !w.armed {
		w.log.Info("armed: every replica replicates from the primary; automatic failover is on",
			zap.String("primary", sqldb.Addr(g.primary)), zap.Strings("replicas", addrs(g.replicas)))
	}
	w.armed = armed
	w.m.Armed(w.t.Label, armed)
}

// unseen lists the replicas not seen replicating from the primary.
func (w *Watcher) unseen(g *Group) []string {
	var out []string
	for _, r := range g.replicas {
		if !w.seen[r] {
			out = append(out, sqldb.Addr(r))
		}
	}
	return out
}

// dead reports whether the primary, unreachable for --after, is dead: a
// replica confirms it lost it, none receives from it, and the watcher is
// armed. why says what decided.
func (w *Watcher) dead(g *Group, reps []replicaView) (why string, ok bool) {
	var confirm, other []string
	for _, v := range reps {
		switch v.state {
		case replicating:
			return fmt.Sprintf("replica %s still %s: the primary lives, the watcher's own path to it is cut", sqldb.Addr(v.dsn), v.what), false
		case lost:
			confirm = append(confirm, sqldb.Addr(v.dsn)+" "+v.what)
		default:
			other = append(other, sqldb.Addr(v.dsn)+" "+v.state+": "+v.what)
		}
	}
	switch {
	case w.halted != "":
		return fmt.Sprintf("the automatic failover of this primary failed (%s): an operator must act (%s)", w.halted, w.t.Fix), false
	case !w.known:
		return "the primary was not seen alive since it became the primary: whether it could commit alone is unknown " +
			"(not armed; " + w.t.Fix + " is the operator's)", false
	case w.unsafe != "":
		return "the primary, as last seen, could acknowledge commits no replica has (" + w.unsafe + ")", false
	case !w.armed:
		return fmt.Sprintf("not armed (no flapping): replica(s) %s not seen replicating from this primary since it became the primary "+
			"(after a failover: rejoin the old primary)", strings.Join(w.unseen(g), ", ")), false
	case len(confirm) == 0:
		return "no reachable replica confirms it lost the primary: " + strings.Join(other, "; "), false
	}
	return "replica(s) confirm: " + strings.Join(confirm, "; "), true
}

// failover fails the group over with Reparenter.Failover, the code of
// hbctl set failover. It is not interrupted by SIGTERM half-way (a failover stopped
// between stopping the replicas and publishing leaves the group without a
// primary): it runs to its end, bounded by its own timeouts.
func (w *Watcher) failover(ctx context.Context, g *Group, down time.Duration, why string) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.r.cfg.WaitApplied.D()+2*time.Minute)
	defer cancel()
	var lock HeldLock
	if w.t.Lock != nil {
		var err error
		if lock, err = w.t.Lock(fctx); err != nil {
			w.decide("the primary is dead, no automatic failover now: "+err.Error(), zap.String("primary", sqldb.Addr(g.primary)))
			w.m.Failover(w.t.Label, "refused")
			return
		}
		defer lock.Release()
		// Under the lock, the group as it stands now: an operator may
		// have failed it over meanwhile.
		now, err := w.t.Load(fctx)
		if err != nil || now.primary != g.primary || !slices.Equal(now.replicas, g.replicas) {
			w.decide("the primary is dead, no automatic failover: the group changed meanwhile", zap.String("primary", sqldb.Addr(g.primary)), zap.Error(err))
			w.m.Failover(w.t.Label, "refused")
			return
		}
		g = now
	}
	w.log.Error("the primary is dead: failing over", zap.String("primary", sqldb.Addr(g.primary)),
		zap.Duration("unreachable_for", down.Round(time.Millisecond)), zap.String("why", why),
		zap.Bool("accept_single_copy", w.o.SingleCopy))
	began := time.Now()
	if _, err := w.r.Failover(fctx, g, lock, Options{SingleCopy: w.o.SingleCopy}); err != nil {
		w.halted = err.Error()
		w.m.Failover(w.t.Label, "failed")
		w.log.Error("the automatic failover failed: no further automatic attempt on this primary, an operator must act ("+w.t.Fix+")",
			zap.String("primary", sqldb.Addr(g.primary)), zap.Error(err))
		return
	}
	w.promoted = true
	w.m.Failover(w.t.Label, "done")
	w.log.Warn("automatic failover done", zap.String("old_primary", sqldb.Addr(w.primary)), zap.String("new_primary", sqldb.Addr(g.primary)),
		zap.Duration("took", time.Since(began).Round(time.Millisecond)), zap.Duration("since_first_failed_probe", time.Since(w.downSince).Round(time.Millisecond)))
}

// addrs are DSNs' addresses, for the log.
func addrs(dsns []string) []string {
	out := make([]string, len(dsns))
	for i, d := range dsns {
		out[i] = sqldb.Addr(d)
	}
	return out
}
