package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// The watchdog: hbctl set watch and hbctl core watch fail a replicated
// group over automatically, with exactly the code of hbctl set failover
// (failover.run), when its primary is dead. Every interval it probes the
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
// checked on the primary while it answered). failover.run first fences
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
// lock: its lock is taken on the core members themselves (core_lock.go),
// by hbctl core failover and rejoin and by the core watcher's failover.

// watchOptions are the watch flags.
type watchOptions struct {
	after        time.Duration // how long the primary must be unreachable
	interval     time.Duration // time between probes
	probeTimeout time.Duration // bound of one probe (dial, SELECT 1)
	singleCopy   bool          // --accept-single-copy, passed to the failover
}

// watchFlags defines the watch flags on fs (--accept-single-copy is the
// failover's); their values are in the result once fs is parsed.
func watchFlags(fs *flag.FlagSet) *watchOptions {
	o := &watchOptions{}
	fs.DurationVar(&o.after, "after", 10*time.Second, "watch: fail over once the primary was unreachable this long (and a replica lost it)")
	fs.DurationVar(&o.interval, "interval", time.Second, "watch: time between probes")
	fs.DurationVar(&o.probeTimeout, "probe-timeout", time.Second, "watch: bound of one probe of a server (connect, SELECT 1)")
	return o
}

// check names a bad flag.
func (o watchOptions) check() error {
	switch {
	case o.interval <= 0:
		return usageError{"flag --interval: must be positive"}
	case o.probeTimeout <= 0:
		return usageError{"flag --probe-timeout: must be positive"}
	case o.after < 2*o.interval:
		return usageError{fmt.Sprintf("flag --after: must be at least twice --interval (%v)", o.interval)}
	}
	return nil
}

// cmdSetWatch is hbctl set watch [NAME...]: it watches the SETs named (all
// that have replicas when none is) until ctx ends.
func cmdSetWatch(ctx context.Context, e *env, cfgPath string, names []string, o watchOptions) error {
	cfg, log, err := watchSetup(e, cfgPath, o, "hbctl-set-watch")
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // exiting anyway
	if cfg.MetaDSN == "" {
		return usageError{"set watch: needs a meta database (meta_dsn)"}
	}
	meta, err := topology.OpenMeta(ctx, cfg.MetaDSN, cfg.CoreMembers(), false)
	if err != nil {
		return err
	}
	defer meta.Close()
	if len(names) == 0 {
		t, err := topology.Load(ctx, meta)
		if err != nil {
			return err
		}
		for _, s := range t.Sets {
			if len(s.Replicas) > 0 {
				names = append(names, s.Name)
			}
		}
		if len(names) == 0 {
			return errors.New("set watch: no SET has replicas (sets[].replicas, hbctl set add --replicas)")
		}
	}
	reroute, err := parseReroute(lookup(e.environ, "HBCTL_TEST_REROUTE"))
	if err != nil {
		return err
	}
	var ws []*watcher
	for _, name := range names {
		if _, err := setGroup(ctx, meta, name); err != nil {
			return fmt.Errorf("set watch: %w", err)
		}
		l := log.With(zap.String("set", name))
		ws = append(ws, newWatcher(watchTarget{name: "SET " + name, fix: "hbctl set failover " + name,
			load: func(ctx context.Context) (*group, error) { return setGroup(ctx, meta, name) },
			lock: func(ctx context.Context) (heldLock, error) { return topology.LockFailover(ctx, meta, name) }},
			&failover{e: e, cfg: cfg.Replication, log: l, reroute: reroute}, o))
	}
	return watch(ctx, log, o, ws)
}

// cmdCoreWatch is hbctl core watch: it watches the core group until ctx
// ends.
func cmdCoreWatch(ctx context.Context, e *env, cfg *configs.Config, cfgPath string, o watchOptions) error {
	_, log, err := watchSetup(e, cfgPath, o, "hbctl-core-watch")
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // exiting anyway
	reroute, err := parseReroute(lookup(e.environ, "HBCTL_TEST_REROUTE"))
	if err != nil {
		return err
	}
	l := log.With(zap.String("group", "core"))
	// Reading the members says so of each that does not answer: at debug
	// level, not every interval in the log.
	quiet := &failover{e: e, cfg: cfg.Replication, log: l.WithOptions(zap.IncreaseLevel(zapcore.WarnLevel)), reroute: reroute}
	w := newWatcher(watchTarget{name: "the core group", fix: "hbctl core failover",
		load: func(ctx context.Context) (*group, error) {
			m, err := quiet.coreMembers(ctx, cfg)
			if err != nil {
				return nil, err
			}
			return coreGroup(m, accounts(cfg.MetaDSN, cfg.WalletDSN), quiet.epochOf), nil
		},
		lock: func(ctx context.Context) (heldLock, error) { return quiet.lockCoreOf(ctx, cfg) }}, &failover{e: e, cfg: cfg.Replication, log: l, reroute: reroute}, o)
	return watch(ctx, log, o, []*watcher{w})
}

// watchSetup checks the options and the configuration and builds the log.
func watchSetup(e *env, cfgPath string, o watchOptions, process string) (*configs.Config, *zap.Logger, error) {
	if err := o.check(); err != nil {
		return nil, nil, err
	}
	cfg, err := configs.Load(cfgPath, e.environ)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Replication.SemiSyncTimeout.D() > 0 {
		return nil, nil, usageError{fmt.Sprintf("watch: replication.semi_sync_timeout is %v: a primary that degrades to "+
			"asynchronous replication commits alone once cut off from its replicas, so no failover is automatic; set it to 0 (wait forever)",
			cfg.Replication.SemiSyncTimeout.D())}
	}
	log, err := cfg.Logger(process)
	if err != nil {
		return nil, nil, err
	}
	// The driver reports each failed probe's read on its own: at debug
	// level in the watcher's log, which says what failed already.
	if err := mysql.SetLogger(driverLog{log}); err != nil {
		return nil, nil, err
	}
	return cfg, log, nil
}

// driverLog is the MySQL driver's logger, at debug level.
type driverLog struct{ log *zap.Logger }

func (d driverLog) Print(v ...any) { d.log.Debug("mysql driver: " + fmt.Sprint(v...)) }

// watch runs every watcher until ctx ends.
func watch(ctx context.Context, log *zap.Logger, o watchOptions, ws []*watcher) error {
	log.Info("watching", zap.Int("groups", len(ws)), zap.Duration("after", o.after), zap.Duration("interval", o.interval),
		zap.Duration("probe_timeout", o.probeTimeout), zap.Bool("accept_single_copy", o.singleCopy))
	if o.singleCopy {
		log.Warn("--accept-single-copy: an automatic failover that leaves the promoted primary without a replica lets it " +
			"acknowledge commits on one machine (asynchronous replication) until a replica connects")
	}
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() { w.run(ctx) })
	}
	wg.Wait()
	log.Info("stopped")
	return nil
}

// parseReroute reads HBCTL_TEST_REROUTE, FROM=TO[,FROM=TO...] of
// host:port addresses: the watcher dials TO whenever it would dial FROM.
// Tests only: it cuts the watcher alone off from a server.
func parseReroute(v string) (map[string]string, error) {
	if v == "" {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		from, to, ok := strings.Cut(kv, "=")
		_, _, errFrom := net.SplitHostPort(from)
		_, _, errTo := net.SplitHostPort(to)
		if !ok || errFrom != nil || errTo != nil {
			return nil, fmt.Errorf("HBCTL_TEST_REROUTE=%q: want FROM=TO of host:port", v)
		}
		m[from] = to
	}
	return m, nil
}

// watchTarget is a replicated group a watcher guards.
type watchTarget struct {
	name string                                    // for messages: "SET b", "the core group"
	fix  string                                    // the operator's command when the watcher gives up
	load func(ctx context.Context) (*group, error) // the group as it stands now
	// lock, when set, excludes every other failover or rejoin of the
	// group (an operator's) until released; the failover checks it
	// before each step.
	lock func(ctx context.Context) (heldLock, error)
}

// watcher guards one group. Its state is about the primary it watches
// and is forgotten when another becomes the primary.
type watcher struct {
	t   watchTarget
	f   *failover // says what it does in the log
	o   watchOptions
	log *zap.Logger

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

func newWatcher(t watchTarget, f *failover, o watchOptions) *watcher {
	return &watcher{t: t, f: f, o: o, log: f.log}
}

// run probes every interval until ctx ends.
func (w *watcher) run(ctx context.Context) {
	tick := time.NewTicker(w.o.interval)
	defer tick.Stop()
	for {
		w.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// round probes the primary and the replicas once, and fails the group
// over when the primary is dead (see the rule above).
func (w *watcher) round(ctx context.Context) {
	g, err := w.t.load(ctx)
	if err != nil {
		w.decide("cannot read "+w.t.name+" (no decision this round)", zap.Error(err))
		return
	}
	if g.primary != w.primary {
		w.newPrimary(g)
	}
	perr := w.probePrimary(ctx, g.primary)
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
			zap.String("primary", sqldb.Addr(g.primary)), zap.Duration("after", w.o.after), zap.Error(perr))
	}
	down := time.Since(w.downSince)
	if down < w.o.after {
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
func (w *watcher) newPrimary(g *group) {
	if w.promoted {
		w.log.Warn("disarmed after the automatic failover (no flapping): no automatic failover of "+w.t.name+
			" until every replica replicates from the new primary ("+g.rejoinCmd+")",
			zap.String("primary", sqldb.Addr(g.primary)), zap.Strings("replicas", addrs(g.replicas)))
	} else {
		w.log.Info("watching "+w.t.name, zap.String("primary", sqldb.Addr(g.primary)), zap.Strings("replicas", addrs(g.replicas)))
	}
	w.primary, w.downSince, w.known, w.unsafe = g.primary, time.Time{}, false, ""
	w.seen, w.armed, w.promoted, w.halted, w.last = map[string]bool{}, false, false, "", ""
}

// decide logs a decision once per streak of failed probes (or until the
// next different one).
func (w *watcher) decide(msg string, fields ...zap.Field) {
	if msg == w.last {
		return
	}
	w.last = msg
	w.log.Warn(msg, fields...)
}

// probePrimary connects to the primary afresh and runs SELECT 1 within
// the probe timeout; when it answers it also reads whether it could
// acknowledge a commit that no replica has.
func (w *watcher) probePrimary(ctx context.Context, dsn string) error {
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
func (w *watcher) probeReplicas(ctx context.Context, g *group) []replicaView {
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
func (w *watcher) replicaStatus(ctx context.Context, dsn string) (st replication.Status, err error) {
	err = w.probe(ctx, dsn, func(ctx context.Context, db *sql.DB) error {
		st, err = replication.ReplicaStatus(ctx, db)
		return err
	})
	return st, err
}

// probe runs fn on a fresh connection to dsn (as the operator), all of it
// within the probe timeout: a watcher must see a server as it is now, not
// through a pooled connection that outlived it.
func (w *watcher) probe(ctx context.Context, dsn string, fn func(context.Context, *sql.DB) error) error {
	d := w.o.probeTimeout
	db, err := w.f.adminTimeouts(dsn, d, d, d)
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
func (w *watcher) arm(g *group, reps []replicaView) {
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
}

// unseen lists the replicas not seen replicating from the primary.
func (w *watcher) unseen(g *group) []string {
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
func (w *watcher) dead(g *group, reps []replicaView) (why string, ok bool) {
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
		return fmt.Sprintf("the automatic failover of this primary failed (%s): an operator must act (%s)", w.halted, w.t.fix), false
	case !w.known:
		return "the primary was not seen alive since it became the primary: whether it could commit alone is unknown " +
			"(not armed; " + w.t.fix + " is the operator's)", false
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

// failover fails the group over with failover.run, the code of hbctl set
// failover. It is not interrupted by SIGTERM half-way (a failover stopped
// between stopping the replicas and publishing leaves the group without a
// primary): it runs to its end, bounded by its own timeouts.
func (w *watcher) failover(ctx context.Context, g *group, down time.Duration, why string) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.f.cfg.WaitApplied.D()+2*time.Minute)
	defer cancel()
	var lock heldLock
	if w.t.lock != nil {
		var err error
		if lock, err = w.t.lock(fctx); err != nil {
			w.decide("the primary is dead, no automatic failover now: "+err.Error(), zap.String("primary", sqldb.Addr(g.primary)))
			return
		}
		defer lock.Release()
		// Under the lock, the group as it stands now: an operator may
		// have failed it over meanwhile.
		now, err := w.t.load(fctx)
		if err != nil || now.primary != g.primary || !slices.Equal(now.replicas, g.replicas) {
			w.decide("the primary is dead, no automatic failover: the group changed meanwhile", zap.String("primary", sqldb.Addr(g.primary)), zap.Error(err))
			return
		}
		g = now
	}
	w.log.Error("the primary is dead: failing over", zap.String("primary", sqldb.Addr(g.primary)),
		zap.Duration("unreachable_for", down.Round(time.Millisecond)), zap.String("why", why),
		zap.Bool("accept_single_copy", w.o.singleCopy))
	f := *w.f
	f.g, f.lock = g, lock
	began := time.Now()
	if err := f.run(fctx, failoverOptions{singleCopy: w.o.singleCopy}); err != nil {
		w.halted = err.Error()
		w.log.Error("the automatic failover failed: no further automatic attempt on this primary, an operator must act ("+w.t.fix+")",
			zap.String("primary", sqldb.Addr(g.primary)), zap.Error(err))
		return
	}
	w.promoted = true
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
