package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

const topologyUsage = "usage: hbctl topology init|show [--json]|move --bucket B --to SET"

func cmdTopology(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageError{topologyUsage}
	}
	fs := flags("topology "+args[0], e)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	asJSON := fs.Bool("json", false, "show: print JSON")
	bucket := fs.Int("bucket", -1, "move: the bucket to move (0..999)")
	to := fs.String("to", "", "move: the SET to move it to")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	cfg, err := configs.Load(*cfgPath, e.environ)
	if err != nil {
		return err
	}
	meta, err := topology.OpenMeta(ctx, cfg.MetaDSN, cfg.CoreMembers(), args[0] == "init")
	if err != nil {
		return err
	}
	defer meta.Close()
	switch args[0] {
	case "init":
		return topologyInit(ctx, e, cfg, meta)
	case "show":
		t, err := topology.Load(ctx, meta)
		if err != nil {
			return err
		}
		return topologyShow(e, t, *asJSON)
	case "move":
		if *bucket < 0 || *bucket >= hongbao.Buckets {
			return usageError{"flag --bucket: must be between 0 and 999"}
		}
		if *to == "" {
			return usageError{"flag --to: required (a SET name)"}
		}
		meta.Close()
		return topologyMove(ctx, e, *cfgPath, hongbao.Bucket(*bucket), *to)
	}
	return usageError{topologyUsage}
}

// topologyInit seeds the meta database from the config and records in each
// SET's MySQL the buckets it owns (the fence). A SET's MySQL chosen by a
// failover is kept, and said on stderr (topology.InitNoting).
func topologyInit(ctx context.Context, e *env, cfg *configs.Config, meta *sql.DB) error {
	infos := make([]topology.Set, len(cfg.Sets))
	for i, s := range cfg.Sets {
		infos[i] = topology.Set{Name: s.Name, Servers: s.Servers, MySQLDSN: s.MySQLDSN, Replicas: s.Replicas, Memcached: s.Memcached}
	}
	var t *topology.Map
	if err := unstalled(ctx, e, "topology init: the meta database", coreDSNs(cfg),
		"start the core group's replica, or after hbctl core failover run hbctl core rejoin", func(ctx context.Context) (err error) {
			t, err = topology.InitNoting(ctx, meta, infos, func(s string) { fmt.Fprintln(e.stderr, "hbctl topology init: "+s) })
			return err
		}); err != nil {
		return err
	}
	for _, s := range t.Sets {
		fix := fmt.Sprintf("start its replica, or after hbctl set failover %s run hbctl set rejoin %s", s.Name, s.Name)
		if err := unstalled(ctx, e, "topology init: SET "+s.Name, []string{s.MySQLDSN}, fix, func(ctx context.Context) error {
			return withDB(s.MySQLDSN, func(db *sql.DB) error {
				return fence.Own(ctx, db, s.Name, t.Version, t.Buckets(s.Name))
			})
		}); err != nil {
			return fmt.Errorf("SET %s: %w", s.Name, err)
		}
	}
	fmt.Fprintf(e.stdout, "topology version %d\n", t.Version)
	return topologyShow(e, t, false)
}

// coreDSNs are the DSNs of the core group's members (the meta database
// may be on any of them after a core failover).
func coreDSNs(cfg *configs.Config) []string {
	dsns := []string{cfg.MetaDSN}
	c, err := mysql.ParseDSN(cfg.MetaDSN)
	if err != nil {
		return dsns
	}
	for _, addr := range cfg.Core.Replicas {
		c.Addr = addr
		dsns = append(dsns, c.FormatDSN())
	}
	return dsns
}

type setJSON struct {
	Name        string   `json:"name"`
	Servers     []string `json:"servers"`
	Memcached   []string `json:"memcached"`
	BucketCount int      `json:"bucket_count"`
	Buckets     string   `json:"buckets"` // ranges, e.g. "0-499"
}

func topologyShow(e *env, t *topology.Map, asJSON bool) error {
	out := struct {
		Version int64     `json:"version"`
		Sets    []setJSON `json:"sets"`
	}{Version: t.Version}
	for _, s := range t.Sets {
		bs := t.Buckets(s.Name)
		out.Sets = append(out.Sets, setJSON{Name: s.Name, Servers: s.Servers, Memcached: s.Memcached,
			BucketCount: len(bs), Buckets: ranges(bs)})
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	fmt.Fprintf(e.stdout, "version %d\n", t.Version)
	for _, s := range out.Sets {
		fmt.Fprintf(e.stdout, "SET %-8s buckets %4d [%s]  servers %s  memcached %s\n", s.Name, s.BucketCount, s.Buckets,
			strings.Join(s.Servers, ","), strings.Join(s.Memcached, ","))
	}
	return nil
}

// ranges writes sorted buckets as "0-4,7,9-12".
func ranges(bs []hongbao.Bucket) string {
	var parts []string
	for i := 0; i < len(bs); {
		j := i
		for j+1 < len(bs) && bs[j+1] == bs[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(int(bs[i])))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", bs[i], bs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// topologyMove moves bucket b to SET to, live: a rebalance of one move
// (move.Operator.MoveBucket). When the bucket is already there, it
// deletes what a move stopped after its publish left on other SETs.
func topologyMove(ctx context.Context, e *env, cfgPath string, b hongbao.Bucket, to string) error {
	o, err := openOps(ctx, cfgPath, e, time.Now)
	if err != nil {
		return err
	}
	defer o.Close()
	t, err := topology.Load(ctx, o.Meta)
	if err != nil {
		return err
	}
	if _, ok := t.Set(to); !ok {
		return usageError{fmt.Sprintf("flag --to: no SET named %q", to)}
	}
	src := t.Owner(b)
	if src.Name == to {
		fmt.Fprintf(e.stdout, "bucket %d already on SET %s\n", b, to)
		kept, err := o.DropLeftovers(ctx, t, b)
		for _, s := range kept {
			fmt.Fprintf(e.stdout, "SET %s still claims bucket %d: its rows are kept\n", s, b)
		}
		return err
	}
	if err := o.MoveBucket(ctx, o.mover(e, 1, moveSettle), b, src.Name, to); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "bucket %d now on SET %s\n", b, to)
	return nil
}

// moveSettle outlasts two topology polls.
const moveSettle = 2500 * time.Millisecond

func withDB(dsn string, fn func(*sql.DB) error) error {
	db, err := sqldb.Open(dsn, 4)
	if err != nil {
		return err
	}
	defer db.Close()
	return fn(db)
}
