package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hongbao-dev/hongbao/set/topology"
)

// topologyStale is how old the last read of the topology may be before the
// server is not ready. The watcher reads it every second; five missed reads
// mean the meta database is out of reach, and the server may be working
// from an old map (an old primary after a failover, buckets that moved in
// answered 421).
const topologyStale = 5 * time.Second

// topologyReady is the server's readiness beyond its own (set.Server.Ready:
// not draining, its MySQL answers), on the routers' probe and the admin
// listener alike: the topology was read within topologyStale, and its SET
// is in it (a SET owning no bucket yet, just added or drained, is ready:
// buckets are moved to ready SETs). nil without a meta database.
func topologyReady(topo *topology.Watcher, name string) func(context.Context) error {
	if topo == nil {
		return nil
	}
	return func(context.Context) error {
		if last := topo.LastRefresh(); time.Since(last) > topologyStale {
			return fmt.Errorf("topology: not read since %s (the meta database is out of reach)", last.Format(time.RFC3339))
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
