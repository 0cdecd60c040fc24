// Command hbserver is a SET server: the API of one SET over its MySQL and
// memcached, with the per-packet queues.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/metrics/admin"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/set"
	"github.com/hongbao-dev/hongbao/set/move"
	"github.com/hongbao-dev/hongbao/set/settings"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/cache"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hbserver:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("hbserver", flag.ContinueOnError)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	setName := fs.String("set", "", "name of the SET this server belongs to (required)")
	listen := fs.String("listen", "", "address to serve on, e.g. 127.0.0.1:8081 (required)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the process's whole life to this file (profiling under load)")
	advertise := fs.String("advertise", "", "host:port routers send to, as listed in the config's servers "+
		"(default: -listen when it names a host, else the address each connection came in on)")
	adminAddr := fs.String("admin", "", "admin listener (metrics, health, pprof; default: admin.server of the config, \"off\" for none)")
	clockOffset := configs.ClockOffsetFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProfile, err := admin.CPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if *setName == "" {
		return errors.New("flag -set: required")
	}
	if _, _, err := net.SplitHostPort(*listen); err != nil {
		return fmt.Errorf("flag -listen: %q is not host:port", *listen)
	}
	if _, _, err := net.SplitHostPort(*advertise); *advertise != "" && err != nil {
		return fmt.Errorf("flag -advertise: %q is not host:port", *advertise)
	}
	cfg, err := configs.Load(*cfgPath, os.Environ())
	if err != nil {
		return err
	}
	// The meta database's SET when there is one: a SET added at run time
	// need not be in this host's configuration file.
	lookup, cancelLookup := context.WithTimeout(context.Background(), 30*time.Second)
	sc, err := settings.Set(lookup, cfg, *setName)
	cancelLookup()
	if err != nil {
		return fmt.Errorf("flag -set: %w", err)
	}
	log, err := cfg.Logger("hbserver")
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	log = log.With(zap.String("set", sc.Name), zap.String("listen", *listen))
	now := configs.Clock(*clockOffset, log) // what this server stamps for other hosts
	// Armed by the stop signal, disarmed once everything below is closed.
	overrun := admin.Overrun{Exit: os.Exit}
	defer overrun.Disarm()

	// Switchable pools: after a failover of the SET's MySQL (a new DSN in
	// the topology) they dial the new primary, without a restart.
	live, err := sqldb.OpenSwitch(sc.MySQLDSN, cfg.DBConns)
	if err != nil {
		return err
	}
	db := live.DB()
	defer db.Close()
	coldSw, err := sqldb.OpenSwitch(sc.Cold(), 4)
	if err != nil {
		return err
	}
	cold := coldSw.DB()
	defer cold.Close()
	replica, err := sqldb.OpenSwitch(settings.ReadReplica(sc.MySQLDSN, sc.Replicas), 4)
	if err != nil {
		return err
	}
	defer replica.DB().Close()
	// One round of probes of the core group for all the pools on it
	// (closed after them: deferred before the loops and the wallet).
	core, err := settings.CoreProbes(cfg)
	if err != nil {
		return err
	}
	defer core.Close()
	// The background loops are this function's: stopLoops ends them and
	// waits for them. It runs once the server drained, and, deferred after
	// the pools above, before they close on any early return too.
	bg, cancelBG := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	stopLoops := func() { cancelBG(); loops.Wait() }
	defer stopLoops()
	topo, meta, err := settings.Topology(bg, cfg, core, log)
	if err != nil {
		return err
	}
	var owns func(hongbao.Bucket) bool
	var recheck func(context.Context, hongbao.Bucket) bool
	if topo != nil {
		loops.Go(func() { topo.Run(bg); meta.Close() })
		owns, recheck = topo.Owns(sc.Name), topo.Recheck(sc.Name)
	}
	if err := schema.EnsureSet(bg, db); err != nil {
		return err
	}
	if topo != nil {
		// Interrupted moves are finished (or sent back) by every server
		// of their source, for as long as the server runs.
		rec := move.NewRecovery(cfg.MetaDSN, cfg.CoreMembers(), db, sc.Name, func(b hongbao.Bucket) string { return topo.Current().Owner(b).Name }, log)
		rec.Now, rec.Core = now, core
		loops.Go(func() { rec.Run(bg) })
	}
	reg := metrics.NewRegistry()
	st := store.New(db, sc.Name, cfg.Location(), now, rand.Int64N).WithArchive(cold).WithMetrics(metrics.NewStore(reg))
	if cfg.Webhooks.On() { // sends and opens write their events in their transactions
		st = st.WithEvents()
	}
	if cfg.Replication.ReadReplica {
		lag := replication.NewLag(db, replica.DB(), cfg.Replication.MaxReplicaLag.D())
		loops.Go(func() { lag.Run(bg, time.Second) })
		st = st.WithReplica(replica.DB(), lag.Fresh)
	}
	if topo != nil {
		loops.Go(func() {
			settings.FollowPrimary(bg, topo, sc.Name, settings.Pools{Primary: live, Archive: coldSw, Replica: replica}, log)
		})
	}
	wl, err := wallet.Open(bg, cfg.WalletDSN, cfg.CoreMembers(), cfg.DBConns, now, settings.CoreMoves(log, "wallet"), sqldb.ProbedBy(core))
	if err != nil {
		return err
	}
	defer wl.Close()
	wl.WithDaily(settings.Daily(cfg), cfg.Location())
	q := settings.Queue(cfg)
	q.Metrics = metrics.NewQueue(reg)
	srv := set.NewServer(set.Deps{
		Owns:        owns,
		Recheck:     recheck,
		Ready:       topologyReady(topo, sc.Name),
		Wallet:      wl,
		DevGrant:    cfg.DevGrant,
		Store:       st,
		Cache:       cache.New(sc.Memcached, cfg.Cache.Timeout.D(), cfg.Cache.Conns, log).WithMetrics(metrics.NewCache(reg)).WithClock(now),
		Auth:        api.NewInternal([]byte(cfg.InternalSecret), now),
		Self:        selfAddr(*listen, *advertise),
		Limits:      settings.Limits(cfg),
		Queue:       q,
		SoldOutMemo: cfg.Queue.Memo,
		Loc:         cfg.Location(), Now: now, Log: log,
		HTTP: metrics.NewHTTP(reg), Opens: metrics.NewOpens(reg),
	})
	srv.Register(reg)
	if topo != nil {
		loops.Go(func() { followBuckets(bg, topo, sc.Name, srv) })
	}
	metrics.RegisterOutbox(reg, sc.Name, srv.OutboxBacklog, now)
	ready := admin.Check(srv.Ready)
	metrics.Ready(reg, admin.Now(bg, ready))
	if topo != nil {
		metrics.RegisterTopology(reg, metrics.Topology{Version: func() int64 { return topo.Current().Version },
			Moves: topo.Moved, LastRefresh: topo.LastRefresh})
	}
	adm, err := admin.Start(admin.Address(*adminAddr, cfg.Admin.Server), admin.Handler(reg, ready), log)
	if err != nil {
		return err
	}
	defer adm.Shutdown(context.Background()) //nolint:errcheck // exiting anyway
	err = serve(log, *listen, srv, cfg.ShutdownGrace.D(), cfg.Admin.DrainGrace.D(), &overrun)
	stopLoops() // drained: the loops end before the pools close
	return err
}

// stopMargin is what a stop may take beyond its drain and shutdown
// graces: the loops ending and the pools closing.
const stopMargin = 10 * time.Second

// selfAddr is the address router signatures must name: -advertise, or
// -listen unless it is a wildcard (0.0.0.0:8081, :8081), which routers
// cannot dial as such.
func selfAddr(listen, advertise string) string {
	if advertise != "" {
		return advertise
	}
	host, _, _ := net.SplitHostPort(listen) // checked by run
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return ""
	}
	return listen
}

// followBuckets tells srv which buckets its SET owns each time the
// topology's version changes (looked at every 100 ms), so the server
// forgets what it knew of a bucket that left.
func followBuckets(ctx context.Context, topo *topology.Watcher, name string, srv *set.Server) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	seen := int64(-1)
	for {
		if m := topo.Current(); m.Version != seen {
			seen = m.Version
			srv.Owned(func(b hongbao.Bucket) bool { return m.Owner(b).Name == name })
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// serve runs the HTTP server until SIGINT or SIGTERM. Then it turns
// not-ready first and keeps serving for drain (routers probe /readyz every
// second and stop sending it packets), then stops taking requests,
// finishes those in flight and drains every packet queue. From the
// signal on, overrun bounds the whole stop (closing the pools included).
func serve(log *zap.Logger, addr string, srv *set.Server, grace, drain time.Duration, overrun *admin.Overrun) error {
	hs := &http.Server{Addr: addr, Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	// Serve returns once Shutdown closed its listener; the goroutine is
	// waited for below.
	go func() { errc <- hs.Serve(api.RefusedAsProblems(ln)) }()
	log.Info("serving")
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	overrun.Arm(drain+grace+stopMargin, log)
	srv.Drain()
	log.Info("shutting down: not ready; draining after the grace", zap.Duration("drain_grace", drain))
	time.Sleep(drain)
	log.Info("shutting down: draining requests and queues")
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	herr := hs.Shutdown(sctx)
	<-errc // http.ErrServerClosed
	qerr := srv.Close(sctx)
	if err := errors.Join(herr, qerr); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}
