package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/settings"
)

const limitsUsage = "usage: hbctl limits set --user U [--daily-send-count N] [--daily-send-total FEN] [--daily-receive-total FEN] | show --user U | clear --user U"

// cmdLimits sets, shows or clears one user's daily limits, kept in the
// wallet database: a value set replaces the configured limit for that user
// (0: no limit), a flag left out keeps what the user had.
func cmdLimits(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || (args[0] != "set" && args[0] != "show" && args[0] != "clear") {
		return usageError{limitsUsage}
	}
	fs := flags("limits "+args[0], e)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	user := fs.String("user", "", "user ID (required)")
	fs.Int64("daily-send-count", 0, "set: packets the user may send per day (0: no limit)")
	fs.Int64("daily-send-total", 0, "set: fen the user may send per day (0: no limit)")
	fs.Int64("daily-receive-total", 0, "set: fen the user may receive per day (0: no limit)")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	u, err := hongbao.ParseUserID(*user)
	if err != nil {
		return usageError{fmt.Sprintf("flag --user: %q is not a positive integer user ID", *user)}
	}
	o, err := overrideOf(fs, args[0])
	if err != nil {
		return err
	}
	cfg, w, err := openWallet(ctx, e, *cfgPath)
	if err != nil {
		return err
	}
	defer w.Close()
	w.WithDaily(settings.Daily(cfg), cfg.Location())
	switch args[0] {
	case "set":
		err = w.SetLimits(ctx, u, o)
	case "clear":
		err = w.ClearLimits(ctx, u)
	}
	if err != nil {
		return err
	}
	o, l, used, err := w.Limits(ctx, u)
	if err != nil {
		return err
	}
	show := func(name string, limit, used int64, own *int64) {
		src := "configured"
		if own != nil {
			src = "set for the user"
		}
		v := "none"
		if limit > 0 {
			v = strconv.FormatInt(limit, 10)
		}
		fmt.Fprintf(e.stdout, "  %-20s %-10s (%s), used today %d\n", name, v, src, used)
	}
	fmt.Fprintf(e.stdout, "user %s daily limits (day of %s):\n", u, cfg.Location())
	show(hongbao.LimitSendCount, l.SendCount, used.SendCount, o.SendCount)
	show(hongbao.LimitSendTotal, l.SendTotal, used.SendTotal, o.SendTotal)
	show(hongbao.LimitReceiveTotal, l.ReceiveTotal, used.ReceiveTotal, o.ReceiveTotal)
	if o.ReceiveTotal != nil && !w.LimitsReceipts() {
		// The open path holds receipts only when the cluster limits them.
		fmt.Fprintln(e.stdout, "  note: limits.daily_receive_total is 0 in the configuration: receipts are not limited for anyone")
	}
	return nil
}

// overrideOf reads the limits flags given to set (nil: left out); show and
// clear take none.
func overrideOf(fs *flag.FlagSet, sub string) (hongbao.LimitOverride, error) {
	var o hongbao.LimitOverride
	var bad error
	fs.Visit(func(f *flag.Flag) {
		var to **int64
		switch f.Name {
		case "daily-send-count":
			to = &o.SendCount
		case "daily-send-total":
			to = &o.SendTotal
		case "daily-receive-total":
			to = &o.ReceiveTotal
		default:
			return
		}
		v, _ := strconv.ParseInt(f.Value.String(), 10, 64) // parsed by the flag already
		switch {
		case sub != "set":
			bad = usageError{fmt.Sprintf("flag --%s: only limits set takes it", f.Name)}
		case v < 0:
			bad = usageError{fmt.Sprintf("flag --%s: must not be negative (0: no limit)", f.Name)}
		}
		*to = &v
	})
	if bad == nil && sub == "set" && o == (hongbao.LimitOverride{}) {
		bad = usageError{"limits set: give at least one of --daily-send-count, --daily-send-total, --daily-receive-total"}
	}
	return o, bad
}
