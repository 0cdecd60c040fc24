// Command hbsettler settles one SET's money: it delivers the outbox (credits
// to openers, refunds) to the wallet, closes expired packets and decides
// sends a crash left pending. Safe to kill at any point and to run twice.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/metrics/admin"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/set/settings"
	"github.com/hongbao-dev/hongbao/set/settle"
	"github.com/hongbao-dev/hongbao/set/webhooks"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hbsettler:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("hbsettler", flag.ContinueOnError)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	setName := fs.String("set", "", "name of the SET to settle (required)")
	adminAddr := fs.String("admin", "", "admin listener (metrics, health, pprof; default: admin.settler of the config, \"off\" for none)")
	sweepAfter := fs.Duration("sweep-after", 0, "age at which a pending send is decided by the sweeper (default: settle.sweep_after of the config, 30s)")
	clockOffset := configs.ClockOffsetFlag(fs)
	webhookBackoff := fs.Duration("webhook-backoff", 0, "first retry delay of a failed webhook delivery, doubled on each failure up to an hour (default 1s)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *setName == "" {
		return errors.New("flag -set: required")
	}
	if *sweepAfter < 0 {
		return errors.New("flag -sweep-after: must be positive")
	}
	cfg, err := configs.Load(*cfgPath, os.Environ())
	if err != nil {
		return err
	}
	if *sweepAfter == 0 {
		*sweepAfter = cfg.Settle.SweepAfter.D()
	}
	// The meta database's SET when there is one: a SET added at run time
	// need not be in this host's configuration file.
	lookup, cancelLookup := context.WithTimeout(context.Background(), 30*time.Second)
	sc, err := settings.Set(lookup, cfg, *setName)
	cancelLookup()
	if err != nil {
		return fmt.Errorf("flag -set: %w", err)
	}
	log, err := cfg.Logger("hbsettler")
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	log = log.With(zap.String("set", sc.Name))
	now := configs.Clock(*clockOffset, log) // expiries, the sweep's age, refunds' and webhooks' times

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// From the stop signal on, the stop takes the shutdown grace and 10 s
	// more at most; disarmed once everything below is closed.
	overrun := admin.Overrun{Exit: os.Exit}
	defer overrun.Disarm()
	context.AfterFunc(ctx, func() { overrun.Arm(cfg.ShutdownGrace.D()+10*time.Second, log) })
	// A switchable pool: after a failover of the SET's MySQL (a new DSN in
	// the topology) it dials the new primary, without a restart.
	live, err := sqldb.OpenSwitch(sc.MySQLDSN, 8)
	if err != nil {
		return err
	}
	db := live.DB()
	defer db.Close()
	// One round of probes of the core group for all the pools on it
	// (closed after them: deferred before the loops and the wallet).
	core, err := settings.CoreProbes(cfg)
	if err != nil {
		return err
	}
	defer core.Close()
	// The background loops are this function's: stopLoops ends them and
	// waits for them. It runs once the settler stopped, and, deferred after
	// the pool above, before it closes on any early return too. Their own
	// context keeps them following the SET's MySQL while the settler
	// finishes what it was doing.
	bg, cancelBG := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	stopLoops := func() { cancelBG(); loops.Wait() }
	defer stopLoops()
	topo, meta, err := settings.Topology(ctx, cfg, core, log)
	if err != nil {
		return err
	}
	if topo != nil {
		loops.Go(func() { topo.Run(bg); meta.Close() })
		loops.Go(func() { settings.FollowPrimary(bg, topo, sc.Name, settings.Pools{Primary: live}, log) })
	}
	if err := schema.EnsureSet(ctx, db); err != nil {
		return err
	}
	wl, err := wallet.Open(ctx, cfg.WalletDSN, cfg.CoreMembers(), 8, now, settings.CoreMoves(log, "wallet"), sqldb.ProbedBy(core))
	if err != nil {
		return err
	}
	defer wl.Close()
	ss := store.New(db, sc.Name, cfg.Location(), now, rand.Int64N)
	if topo != nil {
		// Refund and fund only the buckets the topology gives this SET,
		// never by a fence row alone (a dead mover's claim).
		ss.WithOwnership(topo.Trusted(sc.Name))
	}
	st := settle.New(ss, wl, now, log)
	st.SweepAfter = *sweepAfter
	st.DeliverEvery = cfg.Settle.DeliverEvery.D()
	reg := metrics.NewRegistry()
	st.Metrics = metrics.NewSettle(reg)
	metrics.RegisterEventBacklog(reg, sc.Name, ss.EventBacklog, now)
	if cfg.Webhooks.On() {
		// Expiries and refunds write their events; the deliverer sends them
		// (its own loop, stopped with the settler's).
		ss.WithEvents()
		d := webhooks.New(ss, &http.Client{}, cfg.Webhooks.URLs, []byte(cfg.Webhooks.Secret), now, log.Named("webhooks"))
		d.Metrics = metrics.NewWebhooks(reg)
		if *webhookBackoff > 0 {
			d.Backoff = *webhookBackoff
		}
		var deliverer sync.WaitGroup
		defer deliverer.Wait() // after ctx ended (stop): the loop has returned before the pools close
		defer stop()
		deliverer.Go(func() { d.Run(ctx) })
	}
	// Ready: its MySQL and the wallet answer.
	ready := func(ctx context.Context) error {
		return errors.Join(db.PingContext(ctx), wl.DB().PingContext(ctx))
	}

	metrics.Ready(reg, admin.Now(ctx, ready))
	adm, err := admin.Start(admin.Address(*adminAddr, cfg.Admin.Settler), admin.Handler(reg, ready), log)
	if err != nil {
		return err
	}
	defer adm.Shutdown(context.Background()) //nolint:errcheck // exiting anyway
	log.Info("settling")
	st.Run(ctx)
	stopLoops() // stopped: the loops end before the pools close
	log.Info("stopped")
	return nil
}
