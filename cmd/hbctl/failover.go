package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Why a failover loses no acknowledged write. Every SET database is a
// semi-synchronous primary waiting AFTER_SYNC with no degrade (a timeout
// of a year, replication.semi_sync_timeout 0): a commit is written to the
// primary's binary log, then waits until a replica has it in its relay log
// and says so, and only then commits in InnoDB and returns to the server,
// which only then answers "opened". So every acknowledged commit is in the
// replica's relay log, and a commit the replica never received was never
// acknowledged (nor visible to anyone: InnoDB did not commit it).
// Failover then:
//
//  1. fences the old primary when it answers: the application's accounts
//     locked (no process connects there again), read_only, and every
//     application connection killed once read_only returned, so its binary
//     log position is final. When read_only does not return (commits wait
//     for an acknowledgement no replica sends) nothing is killed: a killed
//     wait would commit on the old primary alone, where a settler reads and
//     pays it (replication.Fence); the fence is then not final;
//  2. stops the replica's receiving thread when the old primary does not
//     answer or its fence is not final: from then on nobody acknowledges
//     the old primary's commits, so (no degrade) it can acknowledge none
//     to its clients, even if it was only paused and goes on later: it
//     stays without a semi-sync replica;
//  3. waits until the replica has applied everything it received
//     (MASTER_GTID_WAIT on the old primary's position, or on the
//     replica's Gtid_IO_Pos when the old one is gone);
//  4. promotes it: replication stopped and forgotten, a semi-sync primary
//     with the configured timeout, read_only off;
//  5. publishes it in the meta database as the SET's MySQL, the old
//     primary becoming one of its replicas, in a new topology version:
//     servers and settlers move their pools to it within a second.
//
// Meanwhile the SET's writes fail (read-only, connection killed or
// refused): servers answer 503 and clients retry.
//
// Rejoin makes the old primary a replica of the new one, unless it holds
// transactions the new one lacks (errant: written to its binary log but
// never acknowledged, e.g. in flight when it was killed or paused): those
// are named and it is left fenced, to be rebuilt from the new primary.

// dbTimeout bounds each step against a database that may be paused (a
// stopped process accepts TCP connections and answers nothing).
const dbTimeout = 5 * time.Second

func cmdFailover(ctx context.Context, e *env, verb, name, cfgPath string, o failoverOptions) error {
	cfg, err := configs.Load(cfgPath, e.environ)
	if err != nil {
		return err
	}
	if cfg.MetaDSN == "" {
		return usageError{"set " + verb + ": needs a meta database (meta_dsn)"}
	}
	meta, err := topology.OpenMeta(ctx, cfg.MetaDSN, cfg.CoreMembers(), false)
	if err != nil {
		return err
	}
	defer meta.Close()
	// One failover or rejoin of a SET at a time, the watchdog's included;
	// the group is read under the lock.
	lock, err := topology.LockFailover(ctx, meta, name)
	if err != nil {
		return err
	}
	defer lock.Release()
	g, err := setGroup(ctx, meta, name)
	if err != nil {
		return err
	}
	f := &failover{e: e, cfg: cfg.Replication, g: g, lock: lock}
	if verb == "rejoin" {
		return f.rejoinAll(ctx)
	}
	return f.run(ctx, o)
}

// setGroup is SET name's replicated MariaDB as the meta database names it
// now, publishing a failover there: what hbctl set failover, rejoin and
// watch act on.
func setGroup(ctx context.Context, meta *sql.DB, name string) (*group, error) {
	t, err := topology.Load(ctx, meta)
	if err != nil {
		return nil, err
	}
	s, ok := t.Set(name)
	if !ok {
		return nil, usageError{fmt.Sprintf("no SET named %q", name)}
	}
	if len(s.Replicas) == 0 {
		return nil, fmt.Errorf("SET %s has no replicas (sets[].replicas, hbctl set add --replicas)", s.Name)
	}
	return &group{name: "SET " + s.Name, primary: s.MySQLDSN, replicas: s.Replicas, rejoinCmd: "hbctl set rejoin " + s.Name,
		apps: accounts(s.MySQLDSN),
		publish: func(ctx context.Context, primary string, replicas []string) (string, error) {
			v, err := topology.Failover(ctx, meta, s.Name, s.MySQLDSN, primary, replicas)
			if errors.Is(err, topology.ErrPublished) {
				return "", fmt.Errorf("%w (the promoted %s is writable but unknown to servers: hbctl set rejoin %s makes it a replica of the published primary)",
					err, sqldb.Addr(primary), s.Name)
			}
			if err != nil {
				return "", fmt.Errorf("%w (the promoted %s is writable: running failover again publishes it)", err, sqldb.Addr(primary))
			}
			return fmt.Sprintf("at topology version %d; servers and settlers follow within a second", v), nil
		},
		record: func(ctx context.Context, to string) error {
			return topology.RecordPromotion(ctx, meta, s.Name, s.MySQLDSN, to)
		},
		promoted: func(ctx context.Context) (string, bool, error) {
			return topology.Promotion(ctx, meta, s.Name, s.MySQLDSN)
		}}, nil
}

// group is a replicated MariaDB that failover and rejoin act on: a SET's
// database, or the core group of the meta and wallet databases.
type group struct {
	name      string   // for messages: "SET b", "the core group"
	primary   string   // DSN of its primary
	replicas  []string // DSNs of its replicas
	rejoinCmd string   // the command that rejoins the old primary
	// apps are the application's account names: a fence locks them on the
	// old primary, a promotion and a rejoin unlock them.
	apps []string
	// stamp, when set, runs on the promoted replica (of DSN dsn) before
	// it turns writable: the core group's failover epoch.
	stamp func(ctx context.Context, db *sql.DB, dsn string) error
	// publish makes the promoted primary known (the old primary among
	// the replicas) and says how processes follow it.
	publish func(ctx context.Context, primary string, replicas []string) (string, error)
	// record, when set, records in the meta database that this failover
	// (from primary) promotes the replica of DSN to, before it does;
	// promoted returns the replica a failover from primary promoted and
	// did not publish (see topology.RecordPromotion). The core group has
	// neither: its publish is the stamp, part of the promotion.
	record   func(ctx context.Context, to string) error
	promoted func(ctx context.Context) (to string, ok bool, err error)
}

// failover is one failover or rejoin of a group.
type failover struct {
	e   *env
	cfg configs.Replication
	g   *group
	// log, when set, receives what failover says (hbctl set watch: the
	// process's log) instead of stdout.
	log *zap.Logger
	// reroute maps a server's address to another one to dial instead, for
	// every connection this process makes (HBCTL_TEST_REROUTE: a test cuts
	// the watcher alone off from a server); nil: none.
	reroute map[string]string
	// hook, when set, runs before each destructive step of run (a
	// stepX): a test's in-process knob, e.g. to die before publishing.
	hook func(step string) error
	// lock, when set, is the failover lock held for this failover:
	// checked before each destructive step (step).
	lock heldLock
}

// heldLock is a failover lock its holder may have lost meanwhile.
type heldLock interface {
	Held(ctx context.Context) error
	Release()
}

// The destructive steps of a failover, in order (failover.step).
const (
	stepFence   = "fence"   // fence the old primary
	stepStop    = "stop"    // stop the replicas receiving
	stepPromote = "promote" // promote the chosen replica
	stepPublish = "publish" // publish it
)

// step is called before each destructive step of run: it aborts the
// failover when the step must not run: the failover lock was lost (e.g.
// its meta connection was killed by a core failover, and another actor
// may hold it now).
func (f *failover) step(ctx context.Context, name string) error {
	if f.hook != nil {
		if err := f.hook(name); err != nil {
			return fmt.Errorf("%s: before the step %q: %w", f.g.name, name, err)
		}
	}
	if f.lock != nil {
		if err := f.lock.Held(ctx); err != nil {
			return fmt.Errorf("%s: stopped before the step %q (the steps before it are done; run the failover again): %w", f.g.name, name, err)
		}
	}
	return nil
}

// admin opens a pool on dsn's server as the operator, with short timeouts:
// a read waits at most dbTimeout, so a paused server (a stopped process
// accepts TCP connections and answers nothing) is an error, not a hang.
func (f *failover) admin(dsn string) (*sql.DB, error) { return f.adminWait(dsn, dbTimeout) }

// adminWait is admin with reads waiting up to read (a statement that
// waits on the server, e.g. MASTER_GTID_WAIT, needs longer).
func (f *failover) adminWait(dsn string, read time.Duration) (*sql.DB, error) {
	return f.adminTimeouts(dsn, 2*time.Second, read, dbTimeout)
}

// adminTimeouts is admin with the driver's dial, read and write timeouts.
func (f *failover) adminTimeouts(dsn string, dial, read, write time.Duration) (*sql.DB, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("dsn: %w", err)
	}
	c.User, c.Passwd, c.DBName = f.cfg.AdminUser, f.cfg.AdminPassword, ""
	c.Timeout, c.ReadTimeout, c.WriteTimeout = dial, read, write
	if to, ok := f.reroute[c.Addr]; ok {
		c.Addr = to
	}
	return sqldb.Open(c.FormatDSN(), 2)
}

// say reports a step: on stdout, or in the log when there is one.
func (f *failover) say(format string, args ...any) {
	if f.log != nil {
		f.log.Info(fmt.Sprintf(format, args...))
		return
	}
	fmt.Fprintf(f.e.stdout, format+"\n", args...)
}

// failoverOptions are hbctl set failover's flags.
type failoverOptions struct {
	to         string // the replica to promote; "": the most advanced
	singleCopy bool   // --accept-single-copy
}

// candidate is a replica that stopped receiving from the old primary and
// applied all it received.
type candidate struct {
	dsn string
	pos replication.State // Gtid_IO_Pos: everything it received
	raw string
}

// run fails the group over to its most advanced replica (or o.to).
func (f *failover) run(ctx context.Context, o failoverOptions) error {
	g := f.g
	if len(g.replicas) == 0 {
		return fmt.Errorf("%s has no replica to fail over to", g.name)
	}
	if o.to != "" && !slices.Contains(g.replicas, o.to) {
		return usageError{fmt.Sprintf("flag --to: %q is not a replica of %s (%s)", o.to, g.name, strings.Join(g.replicas, " "))}
	}
	began := time.Now()
	if resumed, err := f.resume(ctx, &o, began); resumed || err != nil {
		return err
	}
	if err := f.step(ctx, stepFence); err != nil {
		return err
	}
	fenced, err := f.fenceOld(ctx)
	if err != nil {
		return err
	}
	if err := f.step(ctx, stepStop); err != nil {
		return err
	}
	cands, err := f.stopReceiving(ctx, fenced)
	if err != nil {
		return err
	}
	best, err := pick(cands, o.to)
	if err != nil {
		return err
	}
	var others []string
	for _, c := range cands {
		if c.dsn != best.dsn {
			others = append(others, c.dsn)
		}
	}
	if err := f.recordPromotion(ctx, best.dsn); err != nil {
		return err
	}
	if err := f.promote(ctx, best, len(others) == 0 && o.singleCopy); err != nil {
		return err
	}
	return f.finish(ctx, best.dsn, others, o, began)
}

// finish repoints the other replicas to the promoted primary, publishes
// it and says what the group looks like now.
func (f *failover) finish(ctx context.Context, promoted string, others []string, o failoverOptions, began time.Time) error {
	g := f.g
	// The other replicas follow the new primary before it is published,
	// so that its first commits find a replica to acknowledge them.
	old := g.primary
	g.primary = promoted
	followers := 0
	for _, r := range others {
		if err := f.rejoin(ctx, r); err != nil {
			f.say("replica %s: %v", sqldb.Addr(r), err)
			continue
		}
		followers++
	}
	replicas := append(slices.DeleteFunc(slices.Clone(g.replicas), func(r string) bool { return r == promoted }), old)
	if err := f.step(ctx, stepPublish); err != nil {
		g.primary = old // as published
		return err
	}
	how, err := g.publish(ctx, promoted, replicas)
	if err != nil {
		g.primary = old
		return err
	}
	g.primary, g.replicas = promoted, replicas // the group as it stands now
	f.say("%s's primary is %s %s (failover took %v).", g.name, sqldb.Addr(promoted), how, time.Since(began).Round(time.Millisecond))
	switch {
	case followers > 0:
		f.say("%d replica(s) follow it: %s keeps writing, each commit on two machines", followers, g.name)
	case o.singleCopy:
		f.say("WARNING: no replica follows it and --accept-single-copy: it replicates asynchronously, commits "+
			"are acknowledged on this one machine until a replica connects (%s)", g.rejoinCmd)
	default:
		f.say("WARNING: no replica follows it: every commit waits for one (semi-sync, wait forever), %s's "+
			"writes stall until a replica connects (%s, or a fresh copy); "+
			"--accept-single-copy would have let it write on one machine", g.name, g.rejoinCmd)
	}
	f.say("the old primary %s: %s makes it a replica once it runs", sqldb.Addr(old), g.rejoinCmd)
	return nil
}

// fenceOld fences the old primary where it answers; it reports the GTID
// position it stopped at when its fence is final ("" when it is not: it
// does not answer, or commits there wait for an acknowledgement).
func (f *failover) fenceOld(ctx context.Context) (pos string, err error) {
	old := f.g.primary
	db, err := f.admin(old)
	if err != nil {
		return "", err
	}
	defer db.Close()
	// A paused server accepts the connection and answers nothing: a
	// primary that does not answer a ping within 2 s is treated as gone.
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	err = db.PingContext(pctx)
	pcancel()
	fctx, cancel := context.WithTimeout(ctx, 2*dbTimeout)
	defer cancel()
	var fenced replication.Fenced
	if err == nil {
		fenced, err = replication.Fence(fctx, db, f.g.apps)
	}
	if err == nil && fenced.Final {
		pos, err = replication.BinlogPos(fctx, db)
	}
	switch {
	case err != nil:
		f.say("old primary %s does not answer (%v): not fenced; the replicas stop receiving from it, "+
			"so it can acknowledge no commit (semi-sync without degrade)", sqldb.Addr(old), err)
		return "", nil
	case !fenced.Final:
		f.say("old primary %s: the application's accounts locked (%s), but %d commit(s) wait there for an acknowledgement "+
			"no replica sends: left waiting, never visible nor answered; the replicas stop receiving from it, "+
			"so it can acknowledge none", sqldb.Addr(old), strings.Join(f.g.apps, ", "), fenced.Waiting)
		return "", nil
	}
	f.say("fenced the old primary %s (the application's accounts locked, read_only, connections killed twice) at GTID %q", sqldb.Addr(old), pos)
	return pos, nil
}

// promote makes c the primary: writable, a semi-sync primary with the
// configured timeout; singleCopy lets it replicate asynchronously while no
// replica is connected.
func (f *failover) promote(ctx context.Context, c candidate, singleCopy bool) error {
	var stamp func(context.Context, *sql.DB) error
	if f.g.stamp != nil {
		stamp = func(ctx context.Context, db *sql.DB) error { return f.g.stamp(ctx, db, c.dsn) }
	}
	err := f.on(ctx, c.dsn, func(ctx context.Context, db *sql.DB) error {
		// A member fenced once (an old primary rejoined) may still be
		// locked: the application connects to the new primary.
		if err := replication.Unlock(ctx, db, f.g.apps); err != nil {
			return err
		}
		return replication.Promote(ctx, db, f.cfg.SemiSyncTimeout.D(), !singleCopy, stamp)
	})
	if err != nil {
		return fmt.Errorf("promote %s: %w", sqldb.Addr(c.dsn), err)
	}
	f.say("promoted %s (writable, semi-sync primary) at GTID %q", sqldb.Addr(c.dsn), c.raw)
	return nil
}

// waitApplied waits until dsn's server applied pos, at most
// replication.wait_applied (and its connection a little longer).
func (f *failover) waitApplied(ctx context.Context, dsn, pos string) error {
	d := f.cfg.WaitApplied.D()
	db, err := f.adminWait(dsn, d+dbTimeout)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, d+2*dbTimeout)
	defer cancel()
	return replication.WaitApplied(ctx, db, pos, d)
}

// on runs fn on dsn's server as the operator, bounded by dbTimeout.
func (f *failover) on(ctx context.Context, dsn string, fn func(context.Context, *sql.DB) error) error {
	db, err := f.admin(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	return fn(ctx, db)
}

// accounts returns the user names of dsns, each once: the application's
// accounts that a fence locks.
func accounts(dsns ...string) []string {
	var out []string
	for _, d := range dsns {
		if c, err := mysql.ParseDSN(d); err == nil && c.User != "" && !slices.Contains(out, c.User) {
			out = append(out, c.User)
		}
	}
	return out
}

// replicaDSNs checks --replicas: DSNs separated by spaces.
func replicaDSNs(s string) ([]string, error) {
	var out []string
	for _, d := range strings.Fields(s) {
		if _, err := mysql.ParseDSN(d); err != nil {
			return nil, usageError{fmt.Sprintf("flag --replicas: not a MySQL DSN: %q", d)}
		}
		out = append(out, d)
	}
	return out, nil
}
