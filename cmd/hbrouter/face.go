package main

import (
	"context"
	"database/sql"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/router"
	"github.com/hongbao-dev/hongbao/router/dashboard"
	"github.com/hongbao-dev/hongbao/set/settings"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/audit"
)

// devTokenTTL turns the page's dev sign-in and top-up on exactly when the
// configuration is a dev cluster's (dev_grant > 0), with hbctl token's
// token lifetime.
func devTokenTTL(cfg *configs.Config) time.Duration {
	if cfg.DevGrant <= 0 {
		return 0
	}
	return cfg.TokenTTL.D()
}

// newBoard wires the operator dashboard: the admin listeners of every
// SET's servers and settlers that the configuration lists, the archiver's
// and verify's textfiles, the money audit run in this process (on request,
// and every dashboard.audit_every), and the rebalance journal in meta, the
// meta DB the topology is followed in; now is the router's wall clock.
func newBoard(cfg *configs.Config, meta *sql.DB, topo *topology.Watcher, health *router.Health, reg *prometheus.Registry, now func() time.Time) *dashboard.Board {
	var targets []dashboard.Target
	for _, s := range cfg.Sets {
		for i, addr := range s.Servers {
			tg := dashboard.Target{Set: s.Name, Kind: "server", Name: addr, Addr: addr}
			if i < len(s.Admin) {
				tg.Admin = s.Admin[i]
			}
			targets = append(targets, tg)
		}
		for i, adm := range s.SettlerAdmin {
			targets = append(targets, dashboard.Target{Set: s.Name, Kind: "settler", Name: "settler " + s.Name + string(rune('1'+i)), Admin: adm})
		}
	}
	b := dashboard.New(dashboard.Deps{Topology: topo.Current, Moves: topo.Moved, Healthy: health.Healthy, Router: reg,
		Targets: targets, Archive: cfg.Archive.Textfile, Verify: cfg.Dashboard.VerifyTextfile,
		Client: &http.Client{Timeout: 800 * time.Millisecond}, Meta: meta, Now: now,
		Audit: func(ctx context.Context) ([]string, error) {
			rep, err := settings.RunAudit(ctx, cfg, audit.Options{}, now)
			if err != nil {
				return nil, err
			}
			return rep.Violations(), nil
		}})
	b.Register(reg)
	return b
}
