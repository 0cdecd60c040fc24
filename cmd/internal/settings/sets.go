package settings

import (
	"context"
	"fmt"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/router/topology"
)

// Sets returns the SETs an operator's command acts on. The meta database
// is the truth when the configuration names one: a SET added there (or
// whose addresses changed) is verified and archived even from a host whose
// configuration file is older. A SET's archive DSN, which the meta
// database does not hold, comes from the configuration when it names the
// SET, and is otherwise the SET's own MySQL. Without a meta database the
// configuration's SETs are the fleet.
func Sets(ctx context.Context, c *configs.Config) ([]configs.Set, error) {
	if c.MetaDSN == "" {
		return c.Sets, nil
	}
	meta, err := topology.OpenMeta(ctx, c.MetaDSN, false)
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
		sc := configs.Set{Name: s.Name, Servers: s.Servers, MySQLDSN: s.MySQLDSN, Memcached: s.Memcached}
		if known, err := c.Set(s.Name); err == nil {
			sc.ArchiveDSN = known.ArchiveDSN
		}
		out = append(out, sc)
	}
	return out, nil
}
