package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
)

const replicaUsage = "usage: hbctl replica start HOST:PORT... [-config FILE] [--timeout 10m]"

// cmdReplica is what starts a replica's replication after its mysqld
// started (failover.Reparenter.StartReplica): what it acknowledged and did
// not apply first, and only from the primary its group publishes.
func cmdReplica(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "start" {
		return usageError{replicaUsage}
	}
	// Addresses before the flags, after them, or both.
	var addrs []string
	rest := args[1:]
	for len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		addrs, rest = append(addrs, rest[0]), rest[1:]
	}
	fs := flags("replica start", e)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	timeout := fs.Duration("timeout", 10*time.Minute, "the longest wait for a replica to apply its relay log")
	if err := fs.Parse(rest); err != nil {
		return usageError{err.Error()}
	}
	addrs = append(addrs, fs.Args()...)
	if len(addrs) == 0 {
		return usageError{replicaUsage}
	}
	cfg, err := configs.Load(*cfgPath, e.environ)
	if err != nil {
		return err
	}
	r, err := reparenter(ctx, e, cfg)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, addr := range addrs {
		if _, err := r.StartReplica(ctx, cfg, addr, *timeout); err != nil {
			return fmt.Errorf("replica %s: %w", addr, err)
		}
	}
	return nil
}
