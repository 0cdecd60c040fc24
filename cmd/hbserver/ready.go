package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hongbao-dev/hongbao/admin"
	"github.com/hongbao-dev/hongbao/router/topology"
	"github.com/hongbao-dev/hongbao/set"
)

// readiness is the server's: it is not draining and its MySQL answers
// (Server.Ready), the topology was read within the last 5 seconds, and its
// SET owns buckets at the current version.
func readiness(srv *set.Server, topo *topology.Watcher, name string) admin.Check {
	return func(ctx context.Context) error {
		if err := srv.Ready(ctx); err != nil {
			return err
		}
		if topo == nil {
			return nil
		}
		if last := topo.LastRefresh(); time.Since(last) > 5*time.Second {
			return fmt.Errorf("topology: not read since %s", last.Format(time.RFC3339))
		}
		if t := topo.Current(); len(t.Buckets(name)) == 0 {
			return fmt.Errorf("topology version %d: SET %s owns no bucket", t.Version, name)
		}
		return nil
	}
}
