package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Why following the core group cannot split its brain. The meta and wallet
// databases live on a replicated group (the core group) with no meta
// database above it to publish its primary in: every process is given the
// members' addresses and finds the primary itself. hbctl core failover
// stamps each promotion with a failover epoch, one more than any member
// has, in hb_core.failover on the promoted server, before it turns
// writable; the row replicates to every member that follows it. A pool
// (OpenGroup) goes to the member that is writable (read_only off) and
// carries the highest epoch, never to one with an epoch below the highest
// it followed. So:
//
//   - a fenced old primary is read_only: never chosen;
//   - an old primary that could not be fenced (paused, then resumed, with
//     read_only still off) carries the epoch it had, below the new
//     primary's: no pool that saw the new primary goes back to it. A pool
//     that cannot reach the new one may still pick it (a process started
//     meanwhile on the old primary's side of a partition): its writes
//     cannot commit, since failover stopped every replica's receiving
//     thread and repointed them, and a semi-sync primary that waits forever
//     (replication.semi_sync_timeout 0) acknowledges no commit that no
//     replica received; its reads may be stale, as reads of a lost server
//     are;
//   - two writable members with one epoch would need two promotions from
//     one epoch: hbctl computes the next epoch from every reachable member
//     and refuses a failover while the current primary answers writable
//     (it fences it first).

// Epoch DDL: one row per promotion of the core group, replicated with it.
const epochDDL = `CREATE TABLE IF NOT EXISTS hb_core.failover (
  epoch        BIGINT       NOT NULL PRIMARY KEY,
  primary_addr VARCHAR(255) NOT NULL,
  promoted_at  DATETIME(3)  NOT NULL
) ENGINE=InnoDB`

// Epoch returns the highest failover epoch db's server carries and the
// primary it names; 0 and "" before the first failover.
func Epoch(ctx context.Context, db *sql.DB) (int64, string, error) {
	var epoch int64
	var addr string
	err := db.QueryRowContext(ctx, "SELECT epoch, primary_addr FROM hb_core.failover ORDER BY epoch DESC LIMIT 1").Scan(&epoch, &addr)
	switch {
	case errors.Is(err, sql.ErrNoRows) || IsMissingTable(err):
		return 0, "", nil
	case err != nil:
		return 0, "", fmt.Errorf("schema: failover epoch: %w", err)
	}
	return epoch, addr, nil
}

// StampEpoch records on db's server that it is the primary addr from
// epoch on. hbctl runs it on a promoted replica before it turns writable
// (as the operator, through read_only), so the epoch is in its binary log
// before any application write.
func StampEpoch(ctx context.Context, db *sql.DB, epoch int64, addr string) error {
	if err := EnsureEpochTable(ctx, db); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO hb_core.failover (epoch, primary_addr, promoted_at) VALUES (?, ?, UTC_TIMESTAMP(3))",
		epoch, addr); err != nil {
		return fmt.Errorf("schema: failover epoch %d: %w", epoch, err)
	}
	return nil
}

// EnsureEpochTable creates hb_core.failover on db's server if missing,
// empty (epoch 0, as without it). The meta schema creates it with the
// core group (schema.EnsureMeta), so every probe of a member is one
// statement from the start, not a failing one and a second; StampEpoch
// creates it too, for a group whose meta schema is older. A table that
// exists is left alone with no DDL: even an IF NOT EXISTS that finds it
// is written to the binary log, a transaction a killed primary's replicas
// may lack.
func EnsureEpochTable(ctx context.Context, db *sql.DB) error {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'hb_core' AND TABLE_NAME = 'failover'").Scan(&n); err != nil {
		return fmt.Errorf("schema: failover epoch: %w", err)
	}
	if n > 0 {
		return nil
	}
	for _, stmt := range []string{"CREATE DATABASE IF NOT EXISTS hb_core", epochDDL} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("schema: failover epoch: %w", err)
		}
	}
	return nil
}

// Probe is what one member of a group answered.
type Probe struct {
	Writable bool  // read_only off
	Epoch    int64 // the highest failover epoch it carries
	Err      error // it did not answer
}

// probeTimeout bounds one probe: a paused server accepts the connection
// and answers nothing.
const probeTimeout = time.Second

// ProbeMember reads db's read_only and failover epoch, in one round trip
// once the epoch table exists (every process probes every member of its
// groups twice a second; the meta schema creates the table). On a server
// without it (a group whose meta schema predates it, never failed over)
// that statement fails and read_only is read alone: two round trips.
func ProbeMember(ctx context.Context, db *sql.DB) Probe {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var ro int
	var epoch int64
	err := db.QueryRowContext(ctx, "SELECT @@GLOBAL.read_only, COALESCE((SELECT MAX(epoch) FROM hb_core.failover), 0)").Scan(&ro, &epoch)
	if IsMissingTable(err) {
		epoch, err = 0, db.QueryRowContext(ctx, "SELECT @@GLOBAL.read_only").Scan(&ro)
	}
	if err != nil {
		return Probe{Err: err}
	}
	return Probe{Writable: ro == 0, Epoch: epoch}
}

// Choose returns the index of the member a pool on cur (-1: none yet)
// goes to: writable, an epoch of at least seen, the highest epoch, cur
// among equals; -1 when no member qualifies.
func Choose(probes []Probe, cur int, seen int64) int {
	best := -1
	for i, p := range probes {
		if p.Err != nil || !p.Writable || p.Epoch < seen {
			continue
		}
		if best < 0 || p.Epoch > probes[best].Epoch || (p.Epoch == probes[best].Epoch && i == cur) {
			best = i
		}
	}
	return best
}

// followEvery is how often a group's members are probed.
const followEvery = 500 * time.Millisecond

// GroupProbes probes every member of a replicated group each followEvery
// for all the pools of a process that follow the group (OpenGroup with
// ProbedBy): one probe of each member per round however many pools follow
// it. A pool probing on its own multiplies the group's probe load by the
// pools: a SET server follows the core group with three (the topology,
// move recovery, the wallet), and every process probes every member. The
// probes use the account of the DSN it is made with, no database
// selected. Close stops it.
type GroupProbes struct {
	members []string
	dbs     []*sql.DB // one small pool per member, short timeouts

	mu    sync.Mutex
	last  []Probe
	round uint64        // rounds published; last is the latest's
	next  chan struct{} // closed once a newer round is published
	done  chan struct{} // closed: what newer returns when one already is

	stop    context.CancelFunc
	stopped chan struct{} // closed when the rounds ended (Close)
}

// NewGroupProbes starts probing the members of a group (host:port, in
// the order the pools that use it are given them) with dsn's account.
func NewGroupProbes(dsn string, members []string) (*GroupProbes, error) {
	g := &GroupProbes{members: slices.Clone(members), next: make(chan struct{}), done: make(chan struct{}), stopped: make(chan struct{})}
	close(g.done)
	for _, m := range members {
		p, err := probePool(dsn, m)
		if err != nil {
			g.closePools()
			return nil, err
		}
		g.dbs = append(g.dbs, p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	go g.run(ctx)
	return g, nil
}

// Close stops probing; the pools that followed the group stay where they
// are. Close of nil does nothing.
func (g *GroupProbes) Close() {
	if g == nil {
		return
	}
	g.stop()
	<-g.stopped
	g.closePools()
}

func (g *GroupProbes) closePools() {
	for _, p := range g.dbs {
		p.Close()
	}
}

// run probes every followEvery until ctx ends, publishing each round.
func (g *GroupProbes) run(ctx context.Context) {
	defer close(g.stopped)
	t := time.NewTicker(followEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		probes := g.probeAll(ctx)
		g.mu.Lock()
		g.last = probes
		g.round++
		close(g.next)
		g.next = make(chan struct{})
		g.mu.Unlock()
	}
}

// newer returns a channel closed once a round after round seen is
// published: closed already when one is, so a follower slower than the
// rounds skips none's turn.
func (g *GroupProbes) newer(seen uint64) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.round > seen {
		return g.done
	}
	return g.next
}

// latest returns the last round's probes and its number.
func (g *GroupProbes) latest() ([]Probe, uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last, g.round
}

// probeAll probes every member at once.
func (g *GroupProbes) probeAll(ctx context.Context) []Probe {
	out := make([]Probe, len(g.dbs))
	var wg sync.WaitGroup
	for i, p := range g.dbs {
		wg.Go(func() { out[i] = ProbeMember(ctx, p) })
	}
	wg.Wait()
	return out
}

// follower keeps a Switch on a group's primary.
type follower struct {
	sw      *Switch
	dsns    []string     // the pool's DSN on each member
	src     *GroupProbes // the members' probes
	own     bool         // src is the pool's own: closed with it
	members []string     // the members' addresses
	cur     int          // index of the member the Switch dials
	seen    int64        // highest epoch followed
	moved   func(member string, epoch int64, err error)
	stop    context.CancelFunc
	stopped sync.WaitGroup
}

// GroupOption configures OpenGroup.
type GroupOption func(*follower)

// OnMove has OpenGroup's pool call fn each time it moves to another member
// (a promoted replica, or its member at a higher failover epoch), with the
// member's address and epoch, or with the error that kept it where it was
// (tried again on the next probe): what a process logs, so that its
// operator sees it follow a failover. fn runs on the follower's goroutine
// and must not block.
func OnMove(fn func(member string, epoch int64, err error)) GroupOption {
	return func(f *follower) { f.moved = fn }
}

// ProbedBy has OpenGroup's pool follow the group through g's rounds
// instead of probes of its own; g's members must be the pool's, in the
// same order. g outlives the pool (the process closes it after its
// pools); nil changes nothing.
func ProbedBy(g *GroupProbes) GroupOption {
	return func(f *follower) {
		if g != nil {
			f.src = g
		}
	}
}

// OpenGroup opens a pool on dsn's database in a replicated group whose
// members are at the addresses members (host:port, dsn's account and
// database on each): the writable member with the highest failover epoch
// (dsn's own server when none is writable yet), and, every half second,
// whichever member that is then (see the comment above Epoch for why
// there is no split brain). Statements in flight on a member left fail
// (Switch.To) and callers retry. create creates the database when missing
// (OpenCreate). With no members it is Open (or OpenCreate) of dsn.
// Closing the pool stops following.
func OpenGroup(ctx context.Context, dsn string, members []string, conns int, create bool, opts ...GroupOption) (*sql.DB, error) {
	if len(members) == 0 {
		if create {
			return OpenCreate(ctx, dsn, conns)
		}
		return Open(dsn, conns)
	}
	f := &follower{cur: -1, members: members, moved: func(string, int64, error) {}}
	for _, o := range opts {
		o(f)
	}
	if f.src != nil && !slices.Equal(f.src.members, members) {
		return nil, fmt.Errorf("schema: group: probes of members %v for a pool on %v", f.src.members, members)
	}
	for _, m := range members {
		d, err := memberDSN(dsn, m)
		if err != nil {
			return nil, err
		}
		f.dsns = append(f.dsns, d)
	}
	if f.src == nil {
		g, err := NewGroupProbes(dsn, members)
		if err != nil {
			return nil, err
		}
		f.src, f.own = g, true
	}
	db, err := f.open(ctx, dsn, conns, create)
	if err != nil && f.own {
		f.src.Close()
	}
	return db, err
}

// open opens the pool on the member the probes choose now and starts
// following.
func (f *follower) open(ctx context.Context, dsn string, conns int, create bool) (*sql.DB, error) {
	first := dsn
	_, round := f.src.latest() // the rounds after this one may be newer than the probe below
	probes := f.src.probeAll(ctx)
	if i := Choose(probes, -1, 0); i >= 0 {
		f.cur, f.seen, first = i, probes[i].Epoch, f.dsns[i]
	}
	if create {
		db, err := OpenCreate(ctx, first, 1)
		if err != nil {
			return nil, err
		}
		db.Close()
	}
	sw, err := OpenSwitch(first, conns)
	if err != nil {
		return nil, err
	}
	f.sw = sw
	bg, cancel := context.WithCancel(context.Background())
	f.stop = cancel
	sw.onClose = f.close
	f.stopped.Go(func() { f.run(bg, round) })
	return sw.DB(), nil
}

// memberDSN returns dsn on member's address.
func memberDSN(dsn, member string) (string, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("schema: group: dsn: %w", err)
	}
	cfg.Net, cfg.Addr = "tcp", member
	return cfg.FormatDSN(), nil
}

// probePool returns a pool of one connection on member with dsn's account,
// no database selected, short timeouts.
func probePool(dsn, member string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("schema: group: dsn: %w", err)
	}
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", member, ""
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = probeTimeout, probeTimeout, probeTimeout
	return Open(cfg.FormatDSN(), 1)
}

// run moves the pool to the member Choose names after each round of the
// probes after round, until ctx ends or the probes stop.
func (f *follower) run(ctx context.Context, round uint64) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.src.stopped:
			return
		case <-f.src.newer(round):
		}
		var probes []Probe
		probes, round = f.src.latest()
		i := Choose(probes, f.cur, f.seen)
		if i < 0 || i == f.cur && probes[i].Epoch == f.seen {
			continue
		}
		// A DSN that parsed once parses again; were To to fail, the
		// pool would stay where it is and the next round try again.
		if _, err := f.sw.To(f.dsns[i]); err != nil {
			f.moved(f.members[i], probes[i].Epoch, err)
			continue
		}
		f.cur, f.seen = i, probes[i].Epoch
		f.moved(f.members[i], f.seen, nil)
	}
}

// close stops following (the pool's Close calls it).
func (f *follower) close() {
	f.stop()
	f.stopped.Wait()
	if f.own {
		f.src.Close()
	}
}
