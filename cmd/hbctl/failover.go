package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/failover"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// cmdFailover is hbctl set failover NAME and hbctl set rejoin NAME: the
// SET's replicated MariaDB failed over (set/failover explains why no
// acknowledged write is lost) or its old primary made a replica again.
func cmdFailover(ctx context.Context, e *env, verb, name, cfgPath string, o failover.Options) error {
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
	r, err := reparenter(ctx, e, cfg)
	if err != nil {
		return err
	}
	defer r.Close()
	if verb == "rejoin" {
		_, err = r.RejoinSet(ctx, meta, name)
		return err
	}
	_, err = r.FailoverSet(ctx, meta, name, o)
	return err
}

// reparenter is cfg's failover.Reparenter printing each step on stdout as
// it is done.
// The caller closes it (its connection to etcd, when configured).
func reparenter(ctx context.Context, e *env, cfg *configs.Config) (*failover.Reparenter, error) {
	r, err := failover.Open(ctx, cfg, zap.NewNop())
	if err != nil {
		return nil, err
	}
	r.Progress = func(line string) { fmt.Fprintln(e.stdout, line) }
	return r, nil
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
