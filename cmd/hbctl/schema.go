package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

func cmdSchema(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "ensure" {
		return usageError{"usage: hbctl schema ensure [--set NAME] [--days N]"}
	}
	fs := flags("schema ensure", e)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	setName := fs.String("set", "", "only this SET (default: every SET)")
	days := fs.Int("days", 1, "also create the tables of the next N days")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if *days < 0 || *days > 30 {
		return usageError{"flag --days: must be between 0 and 30"}
	}
	cfg, err := configs.Load(*cfgPath, e.environ)
	if err != nil {
		return err
	}
	sets := cfg.Sets
	if *setName != "" {
		sc, err := cfg.Set(*setName)
		if err != nil {
			return usageError{"flag --set: " + err.Error()}
		}
		sets = []configs.Set{sc}
	}
	// One SET after another: on one machine (the dev cluster, the tests)
	// their DDL shares a disk, and side by side it starved every other
	// MariaDB of it.
	for _, sc := range sets {
		n, err := ensureSet(ctx, sc, cfg.Location(), *days)
		if err != nil {
			return fmt.Errorf("SET %s: %w", sc.Name, err)
		}
		fmt.Fprintf(e.stdout, "SET %s: %d day tables ensured\n", sc.Name, n)
	}
	return nil
}

// ensureSet creates the tables of every bucket for today and the next days.
func ensureSet(ctx context.Context, sc configs.Set, loc *time.Location, days int) (int, error) {
	db, err := sqldb.Open(sc.MySQLDSN, 4)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	return schema.NewEnsurer(db).EnsureDays(ctx, fence.AllBuckets(), time.Now().In(loc), days)
}
