package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

const replicaUsage = "usage: hbctl replica start HOST:PORT... [-config FILE] [--timeout 10m]"

// cmdReplica is what starts a replica's replication after its mysqld
// started (--skip-slave-start, replication.ServerArgs): the commits it
// acknowledged and did not apply are applied from its relay log first,
// which MariaDB's GTID replication would otherwise discard, then it
// replicates again (replication.StartReplica). A server that is no
// replica is left alone.
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
	for _, addr := range addrs {
		if err := startReplica(ctx, e, cfg, addr, *timeout); err != nil {
			return fmt.Errorf("replica %s: %w", addr, err)
		}
	}
	return nil
}

// startReplica starts the replication of the server at addr, as the
// operator.
func startReplica(ctx context.Context, e *env, cfg *configs.Config, addr string, timeout time.Duration) error {
	r := cfg.Replication
	c := mysql.NewConfig()
	c.Net, c.Addr, c.User, c.Passwd = "tcp", addr, r.AdminUser, r.AdminPassword
	db, err := sqldb.Open(c.FormatDSN(), 2)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := replication.ReplicaStatus(ctx, db)
	if err != nil {
		return err
	}
	if !st.Configured {
		fmt.Fprintf(e.stdout, "%s: no replica (no primary configured): left alone\n", addr)
		return nil
	}
	// Only from the published primary (a replica that missed a failover
	// names the old one): replica_topology.go.
	return startInTopology(ctx, e, cfg, addr, st, func(ctx context.Context) error {
		pos, err := replication.StartReplica(ctx, db, timeout)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s: relay log applied up to %q; replicating from %s:%d\n", addr, pos, st.MasterHost, st.MasterPort)
		return nil
	})
}
