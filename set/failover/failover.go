package failover

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

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

// Failover fails g over to its most advanced replica (or o.To), checking
// lock (when set) before each destructive step. The report says what was
// done, also when the failover stopped half-way.
func (r *Reparenter) Failover(ctx context.Context, g *Group, lock HeldLock, o Options) (*Report, error) {
	f := r.op(g, lock)
	err := f.run(ctx, o)
	return f.rep, err
}

// Rejoin makes every replica of g that does not replicate from its
// primary a replica of it (lock, when set, is the failover lock held).
func (r *Reparenter) Rejoin(ctx context.Context, g *Group, lock HeldLock) (*Report, error) {
	f := r.op(g, lock)
	err := f.rejoinAll(ctx)
	return f.rep, err
}

// FailoverSet fails SET name over as the meta database names it: under
// the SET's failover lock (one failover or rejoin of a SET at a time, the
// watchdog's included), the group read under it.
func (r *Reparenter) FailoverSet(ctx context.Context, meta *sql.DB, name string, o Options) (*Report, error) {
	return r.underSetLock(ctx, meta, name, func(g *Group, lock HeldLock) (*Report, error) { return r.Failover(ctx, g, lock, o) })
}

// RejoinSet rejoins SET name's replicas as FailoverSet fails it over.
func (r *Reparenter) RejoinSet(ctx context.Context, meta *sql.DB, name string) (*Report, error) {
	return r.underSetLock(ctx, meta, name, func(g *Group, lock HeldLock) (*Report, error) { return r.Rejoin(ctx, g, lock) })
}

// underSetLock runs fn on SET name's group under its failover lock.
func (r *Reparenter) underSetLock(ctx context.Context, meta *sql.DB, name string, fn func(*Group, HeldLock) (*Report, error)) (*Report, error) {
	lock, err := r.lockSet(ctx, meta, name)
	if err != nil {
		return &Report{}, err
	}
	defer lock.Release()
	g, err := SetGroup(ctx, meta, name)
	if err != nil {
		return &Report{}, err
	}
	return fn(g, lock)
}

// candidate is a replica that stopped receiving from the old primary and
// applied all it received.
type candidate struct {
	dsn string
	pos replication.State // Gtid_IO_Pos: everything it received
	raw string
}

// run fails the group over to its most advanced replica (or o.To).
func (f *op) run(ctx context.Context, o Options) error {
	g := f.g
	if len(g.replicas) == 0 {
		return fmt.Errorf("%s has no replica to fail over to", g.name)
	}
	if o.To != "" && !slices.Contains(g.replicas, o.To) {
		return UsageError{fmt.Sprintf("flag --to: %q is not a replica of %s (%s)", o.To, g.name, strings.Join(g.replicas, " "))}
	}
	began := time.Now()
	if resumed, err := f.resume(ctx, &o, began); resumed || err != nil {
		return err
	}
	if err := f.step(ctx, StepFence); err != nil {
		return err
	}
	fenced, err := f.fenceOld(ctx)
	if err != nil {
		return err
	}
	if err := f.step(ctx, StepStop); err != nil {
		return err
	}
	cands, err := f.stopReceiving(ctx, fenced)
	if err != nil {
		return err
	}
	best, err := pick(cands, o.To)
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
	if err := f.promote(ctx, best, len(others) == 0 && o.SingleCopy); err != nil {
		return err
	}
	return f.finish(ctx, best.dsn, others, o, began)
}

// finish repoints the other replicas to the promoted primary, publishes
// it and says what the group looks like now.
func (f *op) finish(ctx context.Context, promoted string, others []string, o Options, began time.Time) error {
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
	if err := f.step(ctx, StepPublish); err != nil {
		g.primary = old // as published
		return err
	}
	how, err := g.publish(ctx, promoted, replicas)
	if err != nil {
		g.primary = old
		return err
	}
	g.primary, g.replicas = promoted, replicas // the group as it stands now
	f.rep.Previous, f.rep.Promoted, f.rep.Took = old, promoted, time.Since(began)
	f.say("%s's primary is %s %s (failover took %v).", g.name, sqldb.Addr(promoted), how, f.rep.Took.Round(time.Millisecond))
	switch {
	case followers > 0:
		f.say("%d replica(s) follow it: %s keeps writing, each commit on two machines", followers, g.name)
	case o.SingleCopy:
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
func (f *op) fenceOld(ctx context.Context) (pos string, err error) {
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
func (f *op) promote(ctx context.Context, c candidate, singleCopy bool) error {
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
func (f *op) waitApplied(ctx context.Context, dsn, pos string) error {
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
