package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hongbao-dev/hongbao/cmd/internal/admin"
	"github.com/hongbao-dev/hongbao/router/topology"
	"github.com/hongbao-dev/hongbao/set"
)

// readiness is the server's: it is not draining and its MySQL answers
// (Server.Ready), the topology was read within the last 5 seconds, and its
// SET is in it (a SET owning no bucket yet, just added or drained, is
// ready: buckets are moved to ready SETs).
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
		if t := topo.Current(); !inTopology(t, name) {
			return fmt.Errorf("topology version %d: no SET %s (hbctl set add)", t.Version, name)
		}
		return nil
	}
}

func inTopology(t *topology.Map, name string) bool {
	_, ok := t.Set(name)
	return ok
}
