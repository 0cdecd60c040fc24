package failover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// StartReplica is what starts a replica's replication after its mysqld
// started (--skip-slave-start, replication.ServerArgs), as the operator:
// the commits it acknowledged and did not apply are applied from its
// relay log first (within timeout), which MariaDB's GTID replication
// would otherwise discard, then it replicates again
// (replication.StartReplica). A server that is no replica is left alone.
func (r *Reparenter) StartReplica(ctx context.Context, cfg *configs.Config, addr string, timeout time.Duration) (*Report, error) {
	f := r.op(nil, nil)
	rc := cfg.Replication
	c := mysql.NewConfig()
	c.Net, c.Addr, c.User, c.Passwd = "tcp", addr, rc.AdminUser, rc.AdminPassword
	db, err := sqldb.OpenDial(c.FormatDSN(), 2, r.Dial)
	if err != nil {
		return f.rep, err
	}
	defer db.Close()
	st, err := replication.ReplicaStatus(ctx, db)
	if err != nil {
		return f.rep, err
	}
	if !st.Configured {
		f.say("%s: no replica (no primary configured): left alone", addr)
		return f.rep, nil
	}
	// Only from the published primary (a replica that missed a failover
	// names the old one): see below.
	return f.rep, f.startInTopology(ctx, cfg, addr, st, func(ctx context.Context) error {
		pos, err := replication.StartReplica(ctx, db, timeout)
		if err != nil {
			return err
		}
		f.say("%s: relay log applied up to %q; replicating from %s:%d", addr, pos, st.MasterHost, st.MasterPort)
		return nil
	})
}

// hbctl replica start checks the topology first (issue 23, finding 3; see
// restart.go for why): a replica starts replicating only from
// the primary its group publishes, under the group's failover lock (so
// never beside a failover that is stopping the replicas); one that names
// another source missed a failover and is rejoined to the published
// primary instead (fenced, what it received applied and compared, errant
// transactions named, repointed).

// startInTopology runs start, the replica at addr (of status st)
// replicating from the source it names, when that source is the primary
// the topology publishes for the replica's group (a SET that lists it in
// the meta database, or the core group); otherwise it rejoins it. A
// replica of no group in the topology, or before topology init, is
// started as it is: a failover acts only on a group of the topology, so
// it missed none.
func (f *op) startInTopology(ctx context.Context, cfg *configs.Config, addr string, st replication.Status, start func(context.Context) error) error {
	if slices.Contains(cfg.CoreMembers(), addr) {
		return f.startInCore(ctx, cfg, addr, st, start)
	}
	if cfg.MetaDSN == "" {
		return start(ctx)
	}
	meta, err := topology.OpenMeta(ctx, cfg.MetaDSN, cfg.CoreMembers(), false)
	if err != nil {
		return err
	}
	defer meta.Close()
	t, err := topology.Load(ctx, meta)
	if errors.Is(err, topology.ErrNotInitialised) || sqldb.IsMissingTable(err) {
		return start(ctx)
	}
	if err != nil {
		return err
	}
	name, ok := setListing(t, addr)
	if !ok {
		f.say("%s: a replica of no SET in the topology: started as it is", addr)
		return start(ctx)
	}
	lock, err := f.r.lockSet(ctx, meta, name)
	if err != nil {
		return err
	}
	defer lock.Release()
	if f.g, err = SetGroup(ctx, meta, name); err != nil {
		return err
	}
	f.lock = lock
	return f.startOrRejoin(ctx, addr, st, start)
}

// startInCore is startInTopology for a member of the core group: under
// the core failover lock, against the primary the highest epoch names.
func (f *op) startInCore(ctx context.Context, cfg *configs.Config, addr string, st replication.Status, start func(context.Context) error) error {
	lock, clock, err := f.r.lockCore(ctx, cfg)
	if err != nil {
		return err
	}
	defer lock.Release()
	for _, d := range clock.Unlocked {
		f.say("core failover lock: member %s not locked (does not answer)", d)
	}
	g, m, err := f.r.CoreGroup(ctx, cfg)
	for _, d := range m.Down {
		f.say("%s", d)
	}
	if err != nil {
		return err
	}
	f.g, f.lock = g, lock
	return f.startOrRejoin(ctx, addr, st, start)
}

// startOrRejoin starts the replica at addr when its source is the group's
// primary, and rejoins it to that primary otherwise.
func (f *op) startOrRejoin(ctx context.Context, addr string, st replication.Status, start func(context.Context) error) error {
	if err := f.noPendingPromotion(ctx); err != nil {
		return err
	}
	host, port, err := replication.Addr(f.g.primary)
	if err != nil {
		return err
	}
	if st.From(ctx, host, port) {
		return start(ctx)
	}
	i := slices.IndexFunc(f.g.replicas, func(d string) bool { return sqldb.Addr(d) == addr })
	if i < 0 {
		return fmt.Errorf("%s: it is %s's primary in the topology, yet names a source (%s:%d): not started", addr, f.g.name, st.MasterHost, st.MasterPort)
	}
	f.say("%s replicates from %s:%d, but %s's primary is %s (it missed a failover): rejoining it to it instead",
		addr, st.MasterHost, st.MasterPort, f.g.name, sqldb.Addr(f.g.primary))
	return f.rejoin(ctx, f.g.replicas[i])
}

// setListing returns the SET whose replicas (or MySQL) include addr.
func setListing(t *topology.Map, addr string) (string, bool) {
	for _, s := range t.Sets {
		if sqldb.Addr(s.MySQLDSN) == addr || slices.ContainsFunc(s.Replicas, func(d string) bool { return sqldb.Addr(d) == addr }) {
			return s.Name, true
		}
	}
	return "", false
}
