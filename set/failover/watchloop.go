package failover

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// SetTarget is SET name as the meta database names it, for a watcher:
// its failover takes the SET's failover lock there.
func (r *Reparenter) SetTarget(meta *sql.DB, name string) Target {
	return Target{Name: "SET " + name, Label: name, Fix: "hbctl set failover " + name,
		Load: func(ctx context.Context) (*Group, error) { return SetGroup(ctx, meta, name) },
		Lock: func(ctx context.Context) (HeldLock, error) { return r.lockSet(ctx, meta, name) }}
}

// CoreTarget is the core group of cfg, for a watcher: its failover takes
// the core failover lock on the members. What the members that do not
// answer say is not logged every interval: the probes say it.
func (r *Reparenter) CoreTarget(cfg *configs.Config) Target {
	return Target{Name: "the core group", Label: "core", Fix: "hbctl core failover",
		Load: func(ctx context.Context) (*Group, error) {
			g, _, err := r.CoreGroup(ctx, cfg)
			return g, err
		},
		Lock: func(ctx context.Context) (HeldLock, error) {
			lock, _, err := r.lockCore(ctx, cfg)
			return lock, err
		}}
}

// CheckAutomatic refuses automatic failovers of groups replicating with
// cfg when a primary may degrade to asynchronous replication (see the
// rule in watch.go).
func CheckAutomatic(cfg configs.Replication) error {
	if cfg.SemiSyncTimeout.D() > 0 {
		return UsageError{fmt.Sprintf("watch: replication.semi_sync_timeout is %v: a primary that degrades to "+
			"asynchronous replication commits alone once cut off from its replicas, so no failover is automatic; set it to 0 (wait forever)",
			cfg.SemiSyncTimeout.D())}
	}
	return nil
}

// Watch runs every watcher, each in a goroutine it owns, until ctx ends,
// and returns once they all stopped. A failover under way when ctx ends
// runs to its end first (Watcher.failover). A Watchdog also follows the
// topology's SETs.
func Watch(ctx context.Context, log *zap.Logger, o WatchOptions, ws []*Watcher) {
	d := &Watchdog{o: o, log: log, fixed: ws}
	d.Run(ctx, time.Hour) // no topology to read again
}

// ReplicatedSets names the SETs of the topology that have replicas: the
// groups a watchdog watches.
func ReplicatedSets(ctx context.Context, meta *sql.DB) ([]string, error) {
	t, err := topology.Load(ctx, meta)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range t.Sets {
		if len(s.Replicas) > 0 {
			names = append(names, s.Name)
		}
	}
	return names, nil
}

// DriverLog is a MySQL driver logger (mysql.SetLogger) writing at debug
// level to log: the driver reports each failed probe's read on its own,
// and the watcher's log says what failed already.
func DriverLog(log *zap.Logger) mysql.Logger { return driverLog{log} }

type driverLog struct{ log *zap.Logger }

func (d driverLog) Print(v ...any) { d.log.Debug("mysql driver: " + fmt.Sprint(v...)) }
