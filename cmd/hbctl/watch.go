package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/failover"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// hbctl set watch and hbctl core watch run the watchdog of set/failover
// (its rule: watch.go there) in the foreground, on the SETs named or the
// core group; hbwatch runs it as a daemon over every group.

// watchFlags defines the watch flags on fs (--accept-single-copy is the
// failover's); their values are in the result once fs is parsed.
func watchFlags(fs *flag.FlagSet) *failover.WatchOptions {
	o := &failover.WatchOptions{}
	fs.DurationVar(&o.After, "after", 10*time.Second, "watch: fail over once the primary was unreachable this long (and a replica lost it)")
	fs.DurationVar(&o.Interval, "interval", time.Second, "watch: time between probes")
	fs.DurationVar(&o.ProbeTimeout, "probe-timeout", time.Second, "watch: bound of one probe of a server (connect, SELECT 1)")
	return o
}

// checkWatch names a bad flag.
func checkWatch(o failover.WatchOptions) error {
	switch {
	case o.Interval <= 0:
		return usageError{"flag --interval: must be positive"}
	case o.ProbeTimeout <= 0:
		return usageError{"flag --probe-timeout: must be positive"}
	case o.After < 2*o.Interval:
		return usageError{fmt.Sprintf("flag --after: must be at least twice --interval (%v)", o.Interval)}
	}
	return nil
}

// cmdSetWatch is hbctl set watch [NAME...]: it watches the SETs named (all
// that have replicas when none is) until ctx ends.
func cmdSetWatch(ctx context.Context, e *env, cfgPath string, names []string, o failover.WatchOptions) error {
	cfg, log, err := watchSetup(e, cfgPath, o, "hbctl-set-watch")
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // exiting anyway
	if cfg.MetaDSN == "" {
		return usageError{"set watch: needs a meta database (meta_dsn)"}
	}
	meta, err := topology.OpenMeta(ctx, cfg.MetaDSN, cfg.CoreMembers(), false)
	if err != nil {
		return err
	}
	defer meta.Close()
	if len(names) == 0 {
		if names, err = failover.ReplicatedSets(ctx, meta); err != nil {
			return err
		}
		if len(names) == 0 {
			return errors.New("set watch: no SET has replicas (sets[].replicas, hbctl set add --replicas)")
		}
	}
	r, err := failover.Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer r.Close()
	var ws []*failover.Watcher
	for _, name := range names {
		if _, err := failover.SetGroup(ctx, meta, name); err != nil {
			return fmt.Errorf("set watch: %w", err)
		}
		ws = append(ws, r.NewWatcher(r.SetTarget(meta, name), o, log.With(zap.String("set", name)), nil))
	}
	failover.Watch(ctx, log, o, ws)
	return nil
}

// cmdCoreWatch is hbctl core watch: it watches the core group until ctx
// ends; its failovers stamp epochs with now.
func cmdCoreWatch(ctx context.Context, e *env, cfg *configs.Config, cfgPath string, o failover.WatchOptions, now func() time.Time) error {
	_, log, err := watchSetup(e, cfgPath, o, "hbctl-core-watch")
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // exiting anyway
	r, err := failover.Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer r.Close()
	r.Now = now
	w := r.NewWatcher(r.CoreTarget(cfg), o, log.With(zap.String("group", "core")), nil)
	failover.Watch(ctx, log, o, []*failover.Watcher{w})
	return nil
}

// watchSetup checks the options and the configuration and builds the log.
func watchSetup(e *env, cfgPath string, o failover.WatchOptions, process string) (*configs.Config, *zap.Logger, error) {
	if err := checkWatch(o); err != nil {
		return nil, nil, err
	}
	cfg, err := configs.Load(cfgPath, e.environ)
	if err != nil {
		return nil, nil, err
	}
	if err := failover.CheckAutomatic(cfg.Replication); err != nil {
		return nil, nil, usageError{err.Error()}
	}
	log, err := cfg.Logger(process)
	if err != nil {
		return nil, nil, err
	}
	// The driver reports each failed probe's read on its own: at debug
	// level in the watcher's log, which says what failed already.
	if err := mysql.SetLogger(failover.DriverLog(log)); err != nil {
		return nil, nil, err
	}
	return cfg, log, nil
}
