package router

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// HealthyPerSet counts, for every SET of the current topology, the servers
// the router believes healthy.
func (rt *Router) HealthyPerSet() map[string]int {
	t := rt.topo.Current()
	out := make(map[string]int, len(t.Sets))
	for _, s := range t.Sets {
		n := 0
		for _, addr := range s.Servers {
			if rt.health.Healthy(addr) {
				n++
			}
		}
		out[s.Name] = n
	}
	return out
}

// Ready is the router's readiness: the topology was read lately (within
// stale) and every SET has a healthy server, so every packet can be
// served.
func (rt *Router) Ready(_ context.Context, stale time.Duration) error {
	var errs []error
	if last := rt.topo.LastRefresh(); time.Since(last) > stale {
		errs = append(errs, fmt.Errorf("topology not read since %s", last.Format(time.RFC3339)))
	}
	for set, n := range rt.HealthyPerSet() {
		if n == 0 {
			errs = append(errs, fmt.Errorf("SET %s: no healthy server", set))
		}
	}
	return errors.Join(errs...)
}
