package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/archive/cron"
	"github.com/hongbao-dev/hongbao/store/statement"
)

func cmdStatement(ctx context.Context, e *env, args []string) error {
	fs := flags("statement", e)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	day := fs.String("day", "", "the day, YYYY-MM-DD in the cluster's time zone (required)")
	format := fs.String("format", "csv", "csv or json")
	out := fs.String("out", "", "file to write atomically (default: standard output)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if !slices.Contains(statement.Formats, *format) {
		return usageError{fmt.Sprintf("flag --format: %q is not csv or json", *format)}
	}
	if _, _, err := statement.ParseDay(*day, time.UTC); err != nil { // the form; the config's zone places it
		return usageError{"flag --day: " + err.Error()}
	}
	cfg, err := configs.Load(*cfgPath, e.environ)
	if err != nil {
		return err
	}
	st, err := cron.WriteStatement(ctx, cfg, *day, *format, *out, e.stdout)
	if st != nil && *out != "" && *out != "-" {
		fmt.Fprintf(e.stderr, "statement of %s: %d entries, %d users, written to %s\n", *day, len(st.Entries), len(st.Balances), *out)
	}
	return err
}
