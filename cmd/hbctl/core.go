package main

import (
	"context"
	"fmt"
	"net"
	"slices"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/failover"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

const coreUsage = "usage: hbctl core failover [--to HOST:PORT] [--accept-single-copy] | rejoin | status | " +
	"watch [--after 10s] [--interval 1s] [--probe-timeout 1s] [--accept-single-copy]"

// cmdCore fails the core group (the meta and wallet databases' replicated
// MariaDB) over, rejoins its old primary, shows its members or watches
// it (failover.Reparenter's FailoverCore, RejoinCore, CoreStatus, and
// the watchdog).
func cmdCore(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageError{coreUsage}
	}
	verb := args[0]
	fs := flags("core "+verb, e)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	to := fs.String("to", "", "failover: the member to promote, host:port (default: the most advanced replica)")
	single := fs.Bool("accept-single-copy", false, "failover, watch: when no other replica follows the promoted one, "+
		"let it write on one machine (asynchronous replication while it has no replica) instead of waiting for one")
	wo := watchFlags(fs)
	offset := configs.ClockOffsetFlag(fs) // the epoch a promotion stamps
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if !slices.Contains([]string{"failover", "rejoin", "status", "watch"}, verb) {
		return usageError{coreUsage}
	}
	if verb != "failover" && *to != "" {
		return usageError{fmt.Sprintf("core %s: flag --to is for failover", verb)}
	}
	if verb != "failover" && verb != "watch" && *single {
		return usageError{fmt.Sprintf("core %s: flag --accept-single-copy is for failover and watch", verb)}
	}
	if _, _, err := net.SplitHostPort(*to); *to != "" && err != nil {
		return usageError{fmt.Sprintf("flag --to: %q is not host:port (a member of core.replicas, or meta_dsn's server)", *to)}
	}
	cfg, err := configs.Load(*cfgPath, e.environ)
	if err != nil {
		return err
	}
	if len(cfg.CoreMembers()) == 0 {
		return usageError{fmt.Sprintf("core %s: the configuration names no core replicas (core.replicas)", verb)}
	}
	if verb == "watch" {
		wo.SingleCopy = *single
		return cmdCoreWatch(ctx, e, cfg, *cfgPath, *wo, clock(e, *offset))
	}
	r, err := reparenter(ctx, e, cfg)
	if err != nil {
		return err
	}
	defer r.Close()
	r.Now = clock(e, *offset)
	switch verb {
	case "status":
		return coreStatus(ctx, e, r, cfg)
	case "rejoin":
		_, err = r.RejoinCore(ctx, cfg)
		return err
	}
	_, err = r.FailoverCore(ctx, cfg, *to, *single)
	return err
}

// coreStatus prints each member of the core group: reachable, read-only,
// its epoch, whom it replicates from.
func coreStatus(ctx context.Context, e *env, r *failover.Reparenter, cfg *configs.Config) error {
	m, err := r.CoreMembers(ctx, cfg)
	for _, d := range m.Down {
		fmt.Fprintln(e.stdout, d)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "core group: primary %s at failover epoch %d\n", sqldb.Addr(m.DSNs[m.Primary]), m.Epoch)
	for _, s := range r.CoreStatus(ctx, m) {
		if s.Err != nil {
			fmt.Fprintf(e.stdout, "  %s: does not answer (%v)\n", s.Addr, s.Err)
			continue
		}
		role, from := "writable", ""
		if !s.Writable {
			role = "read-only"
		}
		if s.Source != "" {
			from = ", replicates from " + s.Source
		}
		fmt.Fprintf(e.stdout, "  %s: %s, epoch %d%s\n", s.Addr, role, s.Epoch, from)
	}
	return nil
}
