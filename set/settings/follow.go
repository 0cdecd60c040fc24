package settings

import (
	"context"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Pools are the switchable pools a SET's process keeps on the SET's MySQL:
// its primary's and, when the process has them (nil: none), its archive's
// and its read replica's.
type Pools struct {
	Primary, Archive, Replica *sqldb.Switch
}

// FollowPrimary points pools at SET name's MySQL as each new version of the
// topology w follows names it (Watcher.FollowSet), until ctx ends: after a
// failover, new connections dial the new primary without a restart. A pool
// that cannot follow is logged and left where it is. The SET's server and
// settler both follow this way.
func FollowPrimary(ctx context.Context, w *topology.Watcher, name string, pools Pools, log *zap.Logger) {
	w.FollowSet(ctx, name, func(s topology.Set) { pools.follow(s, log) })
}

// follow points each pool at the DSN s names for it.
func (p Pools) follow(s topology.Set, log *zap.Logger) {
	for _, q := range []struct {
		what string
		sw   *sqldb.Switch
		dsn  string
	}{{"primary", p.Primary, s.MySQLDSN}, {"archive", p.Archive, s.Cold()}, {"read replica", p.Replica, ReadReplica(s.MySQLDSN, s.Replicas)}} {
		if q.sw == nil {
			continue
		}
		if switched, err := q.sw.To(q.dsn); err != nil {
			log.Error("cannot follow the SET's MySQL", zap.String("pool", q.what), zap.Error(err))
		} else if switched {
			log.Warn("the SET's MySQL moved: new connections go to its new address", zap.String("pool", q.what), zap.String("to", sqldb.Addr(q.dsn)))
		}
	}
}

// ReadReplica is the DSN detail reads may use: the first of a SET's
// replicas, or its primary when there is none (which never measures fresh,
// so its pool stays unused).
func ReadReplica(primary string, replicas []string) string {
	if len(replicas) > 0 {
		return replicas[0]
	}
	return primary
}
