package failover

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// CoreGroup reads the core group's members (as the operator) and
// returns the group with its current primary, for failover and rejoin,
// and what the members said.
func (r *Reparenter) CoreGroup(ctx context.Context, cfg *configs.Config) (*Group, CoreMembers, error) {
	m, err := r.CoreMembers(ctx, cfg)
	if err != nil {
		return nil, m, err
	}
	return r.coreGroup(m, accounts(cfg.MetaDSN, cfg.WalletDSN)), m, nil
}

// FailoverCore fails the core group over under the core failover lock
// (one core failover or rejoin at a time, the watchdog's included), the
// members read under it. to, when set, is the member to promote
// (host:port).
func (r *Reparenter) FailoverCore(ctx context.Context, cfg *configs.Config, to string, singleCopy bool) (*Report, error) {
	return r.underCoreLock(ctx, cfg, func(g *Group, m CoreMembers, lock HeldLock) (*Report, error) {
		o := Options{SingleCopy: singleCopy}
		if to != "" {
			i := slices.IndexFunc(m.DSNs, func(d string) bool { return sqldb.Addr(d) == to })
			if i < 0 {
				return &Report{}, UsageError{fmt.Sprintf("flag --to: %q is not a member of the core group (%v)", to, cfg.CoreMembers())}
			}
			o.To = m.DSNs[i]
		}
		return r.Failover(ctx, g, lock, o)
	})
}

// RejoinCore rejoins the core group's replicas as FailoverCore fails it
// over.
func (r *Reparenter) RejoinCore(ctx context.Context, cfg *configs.Config) (*Report, error) {
	return r.underCoreLock(ctx, cfg, func(g *Group, _ CoreMembers, lock HeldLock) (*Report, error) { return r.Rejoin(ctx, g, lock) })
}

// underCoreLock runs fn on the core group under the core failover lock;
// the report starts with what the lock and the members said.
func (r *Reparenter) underCoreLock(ctx context.Context, cfg *configs.Config, fn func(*Group, CoreMembers, HeldLock) (*Report, error)) (*Report, error) {
	pre := r.op(nil, nil)
	lock, clock, err := r.lockCore(ctx, cfg)
	if err != nil {
		return pre.rep, err
	}
	defer lock.Release()
	for _, d := range clock.Unlocked {
		pre.say("core failover lock: member %s not locked (does not answer)", d)
	}
	g, m, err := r.CoreGroup(ctx, cfg)
	for _, d := range m.Down {
		pre.say("%s", d)
	}
	if err != nil {
		return pre.rep, err
	}
	rep, err := fn(g, m, lock)
	rep.Lines = append(pre.rep.Lines, rep.Lines...)
	return rep, err
}

// CoreMembers is what the core group's members say of its failovers.
type CoreMembers struct {
	DSNs    []string // meta_dsn on each member's address
	Primary int      // index of the primary the highest epoch names (the configured one before any failover)
	Epoch   int64    // the highest epoch any reachable member carries
	Down    []string // a line for each member that did not answer
}

// CoreMembers reads the failover epoch of every member, as the operator.
func (r *Reparenter) CoreMembers(ctx context.Context, cfg *configs.Config) (CoreMembers, error) {
	var m CoreMembers
	var err error
	if m.DSNs, err = coreAdminDSNs(cfg); err != nil {
		return m, err
	}
	f := r.op(nil, nil)
	for _, d := range m.DSNs {
		var epoch int64
		var primary string
		if err := f.on(ctx, d, func(ctx context.Context, db *sql.DB) (err error) {
			epoch, primary, err = sqldb.Epoch(ctx, db)
			return err
		}); err != nil {
			m.Down = append(m.Down, fmt.Sprintf("core member %s does not answer: %v", sqldb.Addr(d), err))
			continue
		}
		if epoch <= m.Epoch {
			continue
		}
		m.Epoch = epoch
		if i := slices.IndexFunc(m.DSNs, func(d string) bool { return sqldb.Addr(d) == primary }); i >= 0 {
			m.Primary = i
		}
	}
	return m, nil
}

// nextEpoch is the epoch a promotion stamps over highest, the highest a
// reachable member carries: the time in milliseconds on this host's clock
// (Now) when that is above it, else highest+1, so that a promoting host
// whose clock is behind still makes the epoch grow.
func (r *Reparenter) nextEpoch(highest int64) int64 {
	return max(highest+1, r.now().UnixMilli())
}

// coreGroup is the core group with its current primary, for failover and
// rejoin. A promotion stamps a new epoch: above every epoch a reachable
// member carries, and at least the time in milliseconds, so that it also
// tops an epoch only an unreachable member carries (stamped by an earlier
// failover that a lagging replica had not received yet).
func (r *Reparenter) coreGroup(m CoreMembers, apps []string) *Group {
	epochOf := r.epochOf
	next := r.nextEpoch(m.Epoch)
	var replicas []string
	for i, d := range m.DSNs {
		if i != m.Primary {
			replicas = append(replicas, d)
		}
	}
	return &Group{name: "the core group", primary: m.DSNs[m.Primary], replicas: replicas, rejoinCmd: "hbctl core rejoin", apps: apps,
		stamp: func(ctx context.Context, db *sql.DB, dsn string) error {
			if err := m.noNewerEpoch(ctx, db, dsn, epochOf); err != nil {
				return err
			}
			return sqldb.StampEpoch(ctx, db, next, sqldb.Addr(dsn))
		},
		publish: func(context.Context, string, []string) (string, error) {
			return fmt.Sprintf("at failover epoch %d; every process follows it within a second (it probes the core members)", next), nil
		}}
}

// noNewerEpoch is the core group's compare-and-set before a stamp: it
// fails when the promoted member (db, of dsn) or any other member that
// answers carries an epoch above m.epoch, the one this failover started
// from: another failover promoted a member meanwhile, and stamping ours
// (possibly higher: epochs follow the clock) would move every process
// away from a primary that may have acknowledged commits. A member that
// does not answer is not read: the core failover lock (lockCore) is what
// excludes a concurrent failover; this catches one that ran between our
// reading the members and our stamp.
func (m CoreMembers) noNewerEpoch(ctx context.Context, db *sql.DB, dsn string, epochOf func(context.Context, string) (int64, error)) error {
	own, _, err := sqldb.Epoch(ctx, db)
	if err != nil {
		return err
	}
	if own > m.Epoch {
		return fmt.Errorf("%s carries failover epoch %d, above epoch %d this failover started from: another core failover promoted "+
			"a member meanwhile (hbctl core status); not stamped", sqldb.Addr(dsn), own, m.Epoch)
	}
	for _, d := range m.DSNs {
		if d == dsn {
			continue
		}
		e, err := epochOf(ctx, d)
		if err == nil && e > m.Epoch {
			return fmt.Errorf("core member %s carries failover epoch %d, above epoch %d this failover started from: another core "+
				"failover promoted it meanwhile (hbctl core status); %s not stamped", sqldb.Addr(d), e, m.Epoch, sqldb.Addr(dsn))
		}
	}
	return nil
}

// MemberStatus is what a core member says of itself (CoreStatus).
type MemberStatus struct {
	Addr     string
	Err      error // it did not answer; the rest is unset
	Writable bool
	Epoch    int64
	// Source is whom it replicates from, with its threads' state ("":
	// no replication configured).
	Source string
}

// CoreStatus reads each member: reachable, read-only, its epoch, whom it
// replicates from.
func (r *Reparenter) CoreStatus(ctx context.Context, m CoreMembers) []MemberStatus {
	f := r.op(nil, nil)
	out := make([]MemberStatus, 0, len(m.DSNs))
	for _, d := range m.DSNs {
		ms := MemberStatus{Addr: sqldb.Addr(d)}
		ms.Err = f.on(ctx, d, func(ctx context.Context, db *sql.DB) error {
			p := sqldb.ProbeMember(ctx, db)
			if p.Err != nil {
				return p.Err
			}
			st, err := replication.ReplicaStatus(ctx, db)
			if err != nil {
				return err
			}
			ms.Writable, ms.Epoch = p.Writable, p.Epoch
			if st.Configured {
				ms.Source = fmt.Sprintf("%s:%d (IO %s, SQL %s)", st.MasterHost, st.MasterPort, st.IORunning, st.SQLRunning)
			}
			return nil
		})
		out = append(out, ms)
	}
	return out
}

// epochOf reads the highest failover epoch dsn's member carries, as the
// operator.
func (r *Reparenter) epochOf(ctx context.Context, dsn string) (epoch int64, err error) {
	err = r.op(nil, nil).on(ctx, dsn, func(ctx context.Context, db *sql.DB) error {
		epoch, _, err = sqldb.Epoch(ctx, db)
		return err
	})
	return epoch, err
}
