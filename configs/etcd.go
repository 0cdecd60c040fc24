package configs

import (
	"errors"
	"time"
)

// Etcd is the etcd cluster that decides who may act on a replicated group
// or a bucket (set/lease): hbwatch's instances, hbctl's failovers, rejoins
// and rebalances take a lease there first, so no two of them act on one
// group or bucket at once, on any host. No endpoints: no etcd, and each
// group is guarded by its MySQL lock alone (one host; see
// docs/REPLICATION.md).
type Etcd struct {
	// Endpoints are the members' client addresses (host:port),
	// HB_ETCD_ENDPOINTS comma-separated.
	Endpoints []string `yaml:"endpoints"`
	// TTL is how long a lease outlives its holder's last keep-alive: how
	// long a dead actor keeps the others waiting.
	TTL Duration `yaml:"ttl"`
}

// check validates the etcd settings.
func (e Etcd) check() error {
	if len(e.Endpoints) > 0 && time.Duration(e.TTL) < time.Second {
		return errors.New("etcd: ttl must be at least 1s")
	}
	return nil
}
