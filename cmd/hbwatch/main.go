// Command hbwatch is the failover watchdog as a daemon: it watches every
// replicated SET the topology lists and the core group, and fails one over
// when its primary is dead (set/failover has the rule and does the
// failover, exactly as hbctl set failover does). Its admin listener serves
// /metrics (armed groups, last probe per group, failovers by outcome),
// /livez, /readyz (ready once every group was probed; not while shutting
// down) and pprof. SIGTERM turns it not ready, then stops the loops: a
// failover under way runs to its end first.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/metrics/admin"
	"github.com/hongbao-dev/hongbao/set/failover"
	"github.com/hongbao-dev/hongbao/set/topology"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Environ())
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hbwatch:", err)
		os.Exit(1)
	}
}

// run reads the flags and the configuration, starts the watchdog and its
// admin listener, and stops them once ctx ends.
func run(ctx context.Context, args, environ []string) error {
	fs := flag.NewFlagSet("hbwatch", flag.ContinueOnError)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	adminAddr := fs.String("admin", "", "admin listener (metrics, health, pprof; default: admin.watch of the config, \"off\" for none)")
	clockOffset := configs.ClockOffsetFlag(fs) // the core group's epoch a promotion stamps
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := configs.Load(*cfgPath, environ)
	if err != nil {
		return err
	}
	if err := failover.CheckAutomatic(cfg.Replication); err != nil {
		return err
	}
	log, err := cfg.Logger("hbwatch")
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // exiting anyway
	if err := mysql.SetLogger(failover.DriverLog(log)); err != nil {
		return err
	}
	reg := metrics.NewRegistry()
	d, err := newDaemon(ctx, cfg, log, metrics.NewWatch(reg))
	if err != nil {
		return err
	}
	d.r.Now = configs.Clock(*clockOffset, log)
	if len(cfg.Etcd.Endpoints) == 0 {
		// Its locks are then GET_LOCKs, held for as long as it hangs
		// (RELIABILITY.md, the failure model): a second watchdog would
		// wait on a hung one instead of taking over.
		log.Warn("no etcd.endpoints: a SET's failover lock is a GET_LOCK in the meta database, held by a hung watchdog until it is killed; configure etcd to run more than one hbwatch")
	}
	defer func() {
		if err := d.Close(); err != nil {
			log.Warn("closing", zap.Error(err))
		}
	}()
	metrics.Ready(reg, admin.Now(context.Background(), d.Ready))
	adm, err := admin.Start(admin.Address(*adminAddr, cfg.Admin.Watch), admin.Handler(reg, d.Ready), log)
	if err != nil {
		return err
	}
	d.Run(ctx)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return adm.Shutdown(sctx)
}

// daemon is the watchdog over every group (failover.Watchdog: the core
// group's watcher and one per replicated SET, followed as the topology
// changes), the meta database it reads the SETs from, and whether it is
// shutting down.
type daemon struct {
	log      *zap.Logger
	meta     *sql.DB // nil without a meta database
	r        *failover.Reparenter
	wd       *failover.Watchdog
	refresh  time.Duration
	stopping atomic.Bool
}

// newDaemon reads the topology and makes the watchdog: a watcher of every
// replicated SET, and of the core group when it has replicas.
func newDaemon(ctx context.Context, cfg *configs.Config, log *zap.Logger, m *metrics.Watch) (*daemon, error) {
	w := cfg.Watch
	o := failover.WatchOptions{After: w.After.D(), Interval: w.Interval.D(), ProbeTimeout: w.ProbeTimeout.D(), SingleCopy: w.AcceptSingleCopy}
	r, err := failover.Open(ctx, cfg, log)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	d := &daemon{log: log, r: r, refresh: w.Refresh.D()}
	if cfg.MetaDSN != "" {
		if d.meta, err = topology.OpenMeta(ctx, cfg.MetaDSN, cfg.CoreMembers(), false); err != nil {
			return nil, errors.Join(err, d.Close())
		}
	}
	var fixed []*failover.Watcher
	if len(cfg.CoreMembers()) > 0 {
		fixed = append(fixed, r.NewWatcher(r.CoreTarget(cfg), o, log.With(zap.String("group", "core")), m))
	}
	d.wd = r.NewWatchdog(d.meta, o, log, m, fixed...)
	if d.meta != nil {
		names, err := failover.ReplicatedSets(ctx, d.meta)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("the topology's SETs: %w", err), d.Close())
		}
		if len(names) > 0 {
			return d, nil
		}
	}
	if len(fixed) == 0 {
		return nil, errors.Join(errors.New("nothing to watch: no SET has replicas and the core group has none (core.replicas)"), d.Close())
	}
	return d, nil
}

// Run watches every group until ctx ends, then turns not ready and stops
// the watchers (their own context: a failover under way ends first), and
// returns once they all stopped.
func (d *daemon) Run(ctx context.Context) {
	loops, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.wd.Run(loops, d.refresh)
	}()
	select {
	case <-ctx.Done():
	case <-done:
	}
	d.stopping.Store(true)
	d.log.Info("shutting down: not ready, stopping the watchers")
	stop()
	<-done
}

// Ready is the readiness check: every group read and probed once, and not
// shutting down.
func (d *daemon) Ready(context.Context) error {
	if d.stopping.Load() {
		return errors.New("shutting down")
	}
	if !d.wd.Probed() {
		return errors.New("not every group probed yet")
	}
	return nil
}

// Close closes the meta database.
func (d *daemon) Close() error {
	var errs []error
	if d.meta != nil {
		if err := d.meta.Close(); err != nil {
			errs = append(errs, fmt.Errorf("meta database: %w", err))
		}
	}
	if err := d.r.Close(); err != nil {
		errs = append(errs, fmt.Errorf("etcd: %w", err))
	}
	return errors.Join(errs...)
}
