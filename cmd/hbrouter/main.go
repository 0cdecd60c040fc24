// Command hbrouter is the stateless public entry point: it verifies tokens,
// mints packet IDs and routes each packet to its SET and server.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
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
	"github.com/hongbao-dev/hongbao/router"
	"github.com/hongbao-dev/hongbao/router/web"
	"github.com/hongbao-dev/hongbao/set/settings"
	"github.com/hongbao-dev/hongbao/set/topology"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hbrouter:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("hbrouter", flag.ContinueOnError)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	listen := fs.String("listen", "", "address to serve on (default: router.listen of the config)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the process's whole life to this file (profiling under load)")
	adminAddr := fs.String("admin", "", "admin listener (metrics, health, pprof; default: admin.router of the config, \"off\" for none)")
	clockOffset := configs.ClockOffsetFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProfile, err := admin.CPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	cfg, err := configs.Load(*cfgPath, os.Environ())
	if err != nil {
		return err
	}
	addr := cfg.Router.Listen
	if *listen != "" {
		addr = *listen
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("flag -listen: %q is not host:port", addr)
	}
	log, err := cfg.Logger("hbrouter")
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	log = log.With(zap.String("listen", addr))
	now := configs.Clock(*clockOffset, log) // packet IDs' times, signatures, tokens
	// Armed by the stop signal, disarmed once everything below is closed:
	// a stop takes the shutdown grace and 10 s more at most.
	overrun := admin.Overrun{Exit: os.Exit}
	defer overrun.Disarm()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	meta, err := topology.OpenMeta(ctx, cfg.MetaDSN, cfg.CoreMembers(), false, settings.CoreMoves(log, "meta"))
	if err != nil {
		return err
	}
	defer meta.Close()
	topo, err := topology.NewWatcher(ctx, meta, time.Second, log)
	if err != nil {
		return err
	}
	client := router.NewClient(256)
	health := router.NewHealth(&http.Client{Timeout: time.Second}, time.Second, log)
	reg := metrics.NewRegistry()
	rt := router.New(router.Deps{Topology: topo, Health: health, Signer: hongbao.NewSigner([]byte(cfg.Secret)),
		Internal: api.NewInternal([]byte(cfg.InternalSecret), now), Client: client, Now: now, Log: log,
		Limits: limits(cfg.Router.RouterLimits),
		HTTP:   metrics.NewHTTP(reg), Page: web.Handler(), DevTokenTTL: devTokenTTL(cfg),
		Coalescing: router.Coalescing{Batch: cfg.Router.Coalesce.Batch, InFlight: cfg.Router.Coalesce.InFlight}})
	ready := func(ctx context.Context) error { return rt.Ready(ctx, 5*time.Second) }
	metrics.Ready(reg, admin.Now(ctx, ready))
	metrics.RegisterHealthyServers(reg, rt.HealthyPerSet)
	metrics.RegisterTopology(reg, metrics.Topology{Version: func() int64 { return topo.Current().Version },
		Moves: topo.Moved, LastRefresh: topo.LastRefresh})
	board := newBoard(cfg, meta, topo, health, reg, now)
	adm, err := admin.Start(admin.Address(*adminAddr, cfg.Admin.Router), board.Handler(admin.Handler(reg, ready)), log)
	if err != nil {
		return err
	}
	defer adm.Shutdown(context.Background()) //nolint:errcheck // exiting anyway

	// The background loops are this function's: stopLoops ends them and
	// waits for them. It runs once no request is left, and, deferred after
	// meta's close, before it on any early return too.
	bg, cancelBG := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	stopLoops := func() { cancelBG(); loops.Wait() }
	defer stopLoops()
	loops.Go(func() { topo.Run(bg) })
	loops.Go(func() { health.Run(bg, func() []string { return allServers(topo.Current()) }) })
	loops.Go(func() { board.AuditEvery(bg, cfg.Dashboard.AuditEvery.D()) })

	// Slow clients are cut off: headers within 5 s, the whole request
	// within 10 s (a late body is answered 408 body_timeout).
	hs := &http.Server{Addr: addr, Handler: rt.Handler(), ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second,
		MaxHeaderBytes: 16 << 10, HTTP2: &http.HTTP2Config{MaxConcurrentStreams: cfg.Router.MaxStreams}}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	errc := make(chan error, 1)
	// Serve returns once Shutdown closed its listener; the goroutine is
	// waited for below.
	go func() { errc <- hs.Serve(api.RefusedAsProblems(ln)) }()
	log.Info("routing", zap.Int64("topology_version", topo.Current().Version))
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	overrun.Arm(cfg.ShutdownGrace.D()+10*time.Second, log)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace.D())
	defer cancel()
	herr := hs.Shutdown(sctx)
	<-errc // http.ErrServerClosed
	if herr != nil && !errors.Is(herr, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", herr)
	}
	// No request is left: the coalescer has nothing more to send.
	if err := rt.Close(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	stopLoops() // drained: the loops end before meta closes
	return nil
}

// limits converts the configuration's abuse limits.
func limits(c configs.RouterLimits) router.Limits {
	rate := func(r configs.Rate) router.Rate { return router.Rate{Every: r.Every(), Burst: r.Burst} }
	return router.Limits{Open: rate(c.Open), Grab: rate(c.Grab), Send: rate(c.Send),
		MaxPerAddress: c.MaxPerAddress, MaxUsers: c.MaxUsers}
}

func allServers(t *topology.Map) []string {
	var all []string
	for _, s := range t.Sets {
		all = append(all, s.Servers...)
	}
	return all
}
