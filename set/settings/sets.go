package settings

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Sets returns the SETs an operator's command acts on. The meta database
// is the truth when the configuration names one: a SET added there (or
// whose addresses changed) is verified and archived even from a host whose
// configuration file is older. What the meta database does not hold comes
// from the configuration when it names the SET: its admin listeners, and
// its archive DSN unless the meta database has one (otherwise the SET's
// own MySQL). Without a meta database the configuration's SETs are the
// fleet.
func Sets(ctx context.Context, c *configs.Config) ([]configs.Set, error) {
	if c.MetaDSN == "" {
		return c.Sets, nil
	}
	meta, err := topology.OpenMeta(ctx, c.MetaDSN, c.CoreMembers(), false)
	if err != nil {
		return nil, fmt.Errorf("settings: SETs: %w", err)
	}
	defer meta.Close()
	m, err := topology.Load(ctx, meta)
	if err != nil {
		return nil, fmt.Errorf("settings: SETs: %w", err)
	}
	out := make([]configs.Set, 0, len(m.Sets))
	for _, s := range m.Sets {
		sc, _ := c.Set(s.Name) // the zero Set when the file does not name it
		sc.Name, sc.Servers, sc.MySQLDSN, sc.Replicas, sc.Memcached = s.Name, s.Servers, s.MySQLDSN, s.Replicas, s.Memcached
		if s.ArchiveDSN != "" {
			sc.ArchiveDSN = s.ArchiveDSN
		}
		out = append(out, sc)
	}
	return out, nil
}

// Set returns the SET called name as Sets sees it, so a process started
// for a SET that was added to the meta database (hbctl set add) finds its
// MySQL and memcached there even when its configuration file does not list
// it.
func Set(ctx context.Context, c *configs.Config, name string) (configs.Set, error) {
	sets, err := Sets(ctx, c)
	if err != nil {
		return configs.Set{}, err
	}
	for _, s := range sets {
		if s.Name == name {
			return s, nil
		}
	}
	where := "in the configuration"
	if c.MetaDSN != "" {
		where = "in the meta database"
	}
	return configs.Set{}, fmt.Errorf("settings: no SET named %q %s", name, where)
}

// Topology opens the meta database the configuration names (its core
// group followed, the moves logged) and loads the topology a SET's server
// and settler follow. Without a meta database it returns nothing (a SET on
// its own: its MySQL fence alone decides). The caller runs w.Run and
// closes meta once Run returned. core are the process's probes of the
// core group (CoreProbes; nil: the pool's own).
func Topology(ctx context.Context, c *configs.Config, core *sqldb.GroupProbes, log *zap.Logger) (w *topology.Watcher, meta *sql.DB, err error) {
	if c.MetaDSN == "" {
		return nil, nil, nil
	}
	meta, err = topology.OpenMeta(ctx, c.MetaDSN, c.CoreMembers(), false, CoreMoves(log, "meta"), sqldb.ProbedBy(core))
	if err != nil {
		return nil, nil, err
	}
	w, err = topology.NewWatcher(ctx, meta, time.Second, log)
	if err != nil {
		meta.Close()
		return nil, nil, err
	}
	return w, meta, nil
}
