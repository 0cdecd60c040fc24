package main

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

const coreUsage = "usage: hbctl core failover [--to HOST:PORT] [--accept-single-copy] | rejoin | status | " +
	"watch [--after 10s] [--interval 1s] [--probe-timeout 1s] [--accept-single-copy]"

// cmdCore fails the core group (the meta and wallet databases' replicated
// MariaDB) over, rejoins its old primary, or shows its members. It is
// hbctl set failover's and rejoin's implementation on another group: the
// members come from the configuration (core.replicas), the current
// primary from the failover epochs they carry, and publishing is the
// epoch stamped on the promoted replica (every process probes the
// members and follows it: sqldb.OpenGroup).
func cmdCore(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageError{coreUsage}
	}
	verb := args[0]
	fs := flags("core "+verb, e)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	to := fs.String("to", "", "failover: the member to promote, host:port (default: the most advanced replica)")
	single := fs.Bool("accept-single-copy", false, "failover, watch: when no other replica follows the promoted one, "+
		"let it write on one machine (asynchronous replication while it has no replica) instead of waiting for one")
	wo := watchFlags(fs)
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if !slices.Contains([]string{"failover", "rejoin", "status", "watch"}, verb) {
		return usageError{coreUsage}
	}
	if verb != "failover" && *to != "" {
		return usageError{fmt.Sprintf("core %s: flag --to is for failover", verb)}
	}
	if verb != "failover" && verb != "watch" && *single {
		return usageError{fmt.Sprintf("core %s: flag --accept-single-copy is for failover and watch", verb)}
	}
	if _, _, err := net.SplitHostPort(*to); *to != "" && err != nil {
		return usageError{fmt.Sprintf("flag --to: %q is not host:port (a member of core.replicas, or meta_dsn's server)", *to)}
	}
	cfg, err := configs.Load(*cfgPath, e.environ)
	if err != nil {
		return err
	}
	if len(cfg.CoreMembers()) == 0 {
		return usageError{fmt.Sprintf("core %s: the configuration names no core replicas (core.replicas)", verb)}
	}
	if verb == "watch" {
		wo.singleCopy = *single
		return cmdCoreWatch(ctx, e, cfg, *cfgPath, *wo)
	}
	f := &failover{e: e, cfg: cfg.Replication}
	if verb != "status" {
		// One core failover or rejoin at a time, core watch's included;
		// the members are read under the lock.
		lock, err := f.lockCoreOf(ctx, cfg)
		if err != nil {
			return err
		}
		defer lock.Release()
		f.lock = lock
	}
	members, err := f.coreMembers(ctx, cfg)
	if err != nil {
		return err
	}
	if verb == "status" {
		f.coreStatus(ctx, members)
		return nil
	}
	f.g = coreGroup(members, accounts(cfg.MetaDSN, cfg.WalletDSN), f.epochOf)
	o := failoverOptions{singleCopy: *single}
	if *to != "" {
		i := slices.IndexFunc(members.dsns, func(d string) bool { return sqldb.Addr(d) == *to })
		if i < 0 {
			return usageError{fmt.Sprintf("flag --to: %q is not a member of the core group (%v)", *to, cfg.CoreMembers())}
		}
		o.to = members.dsns[i]
	}
	if verb == "rejoin" {
		return f.rejoinAll(ctx)
	}
	return f.run(ctx, o)
}

// coreMembers is what the core group's members say of its failovers.
type coreMembers struct {
	dsns    []string // meta_dsn on each member's address
	primary int      // index of the primary the highest epoch names (the configured one before any failover)
	epoch   int64    // the highest epoch any reachable member carries
}

// coreMembers reads the failover epoch of every member, as the operator.
func (f *failover) coreMembers(ctx context.Context, cfg *configs.Config) (coreMembers, error) {
	var m coreMembers
	var err error
	if m.dsns, err = coreAdminDSNs(cfg); err != nil {
		return m, err
	}
	for _, d := range m.dsns {
		var epoch int64
		var primary string
		if err := f.on(ctx, d, func(ctx context.Context, db *sql.DB) (err error) {
			epoch, primary, err = sqldb.Epoch(ctx, db)
			return err
		}); err != nil {
			f.say("core member %s does not answer: %v", sqldb.Addr(d), err)
			continue
		}
		if epoch <= m.epoch {
			continue
		}
		m.epoch = epoch
		if i := slices.IndexFunc(m.dsns, func(d string) bool { return sqldb.Addr(d) == primary }); i >= 0 {
			m.primary = i
		}
	}
	return m, nil
}

// coreGroup is the core group with its current primary, for failover and
// rejoin. A promotion stamps a new epoch: above every epoch a reachable
// member carries, and at least the time in milliseconds, so that it also
// tops an epoch only an unreachable member carries (stamped by an earlier
// failover that a lagging replica had not received yet).
func coreGroup(m coreMembers, apps []string, epochOf func(ctx context.Context, dsn string) (int64, error)) *group {
	next := max(m.epoch+1, time.Now().UnixMilli())
	var replicas []string
	for i, d := range m.dsns {
		if i != m.primary {
			replicas = append(replicas, d)
		}
	}
	return &group{name: "the core group", primary: m.dsns[m.primary], replicas: replicas, rejoinCmd: "hbctl core rejoin", apps: apps,
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
func (m coreMembers) noNewerEpoch(ctx context.Context, db *sql.DB, dsn string, epochOf func(context.Context, string) (int64, error)) error {
	own, _, err := sqldb.Epoch(ctx, db)
	if err != nil {
		return err
	}
	if own > m.epoch {
		return fmt.Errorf("%s carries failover epoch %d, above epoch %d this failover started from: another core failover promoted "+
			"a member meanwhile (hbctl core status); not stamped", sqldb.Addr(dsn), own, m.epoch)
	}
	for _, d := range m.dsns {
		if d == dsn {
			continue
		}
		e, err := epochOf(ctx, d)
		if err == nil && e > m.epoch {
			return fmt.Errorf("core member %s carries failover epoch %d, above epoch %d this failover started from: another core "+
				"failover promoted it meanwhile (hbctl core status); %s not stamped", sqldb.Addr(d), e, m.epoch, sqldb.Addr(dsn))
		}
	}
	return nil
}

// coreStatus prints each member: reachable, read-only, its epoch, whom it
// replicates from.
func (f *failover) coreStatus(ctx context.Context, m coreMembers) {
	f.say("core group: primary %s at failover epoch %d", sqldb.Addr(m.dsns[m.primary]), m.epoch)
	for _, d := range m.dsns {
		err := f.on(ctx, d, func(ctx context.Context, db *sql.DB) error {
			p := sqldb.ProbeMember(ctx, db)
			if p.Err != nil {
				return p.Err
			}
			st, err := replication.ReplicaStatus(ctx, db)
			if err != nil {
				return err
			}
			role := "writable"
			if !p.Writable {
				role = "read-only"
			}
			from := ""
			if st.Configured {
				from = fmt.Sprintf(", replicates from %s:%d (IO %s, SQL %s)", st.MasterHost, st.MasterPort, st.IORunning, st.SQLRunning)
			}
			f.say("  %s: %s, epoch %d%s", sqldb.Addr(d), role, p.Epoch, from)
			return nil
		})
		if err != nil {
			f.say("  %s: does not answer (%v)", sqldb.Addr(d), err)
		}
	}
}

// epochOf reads the highest failover epoch dsn's member carries, as the
// operator.
func (f *failover) epochOf(ctx context.Context, dsn string) (epoch int64, err error) {
	err = f.on(ctx, dsn, func(ctx context.Context, db *sql.DB) error {
		epoch, _, err = sqldb.Epoch(ctx, db)
		return err
	})
	return epoch, err
}
