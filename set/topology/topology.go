// Package topology is the bucket -> SET map: its versions in the meta
// database, and the Watcher with which routers and SET servers follow it;
// the SETs' lifecycle (add, state and weight, remove; a failover's lock,
// recorded promotion and publish), Plan (the fewest moves that even out
// the load), and the journal of rebalances with its lock, leases and
// publish. It knows nothing of a SET's own MySQL or memcached.
package topology

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Set describes one SET.
type Set struct {
	Name     string
	Servers  []string
	MySQLDSN string
	// Replicas are the DSNs of the MySQL's replicas: failover promotes
	// one and swaps it with MySQLDSN.
	Replicas  []string
	Memcached []string
	// ArchiveDSN is the SET's cold store ("": its own MySQL).
	ArchiveDSN string
	// State is Active (it may receive buckets) or Draining (every bucket
	// is to leave it).
	State string
	// Weight scales the SET's share of the load in a rebalance plan.
	Weight int
}

// SET states.
const (
	Active   = "active"
	Draining = "draining"
)

// Cold returns the DSN of the SET's archive: ArchiveDSN, or its MySQL.
func (s *Set) Cold() string {
	if s.ArchiveDSN != "" {
		return s.ArchiveDSN
	}
	return s.MySQLDSN
}

// Map is one version of the bucket -> SET map. It is immutable.
type Map struct {
	Version int64
	Sets    []Set // sorted by name
	owner   [hongbao.Buckets]int
}

// Owner returns the SET owning bucket b.
func (t *Map) Owner(b hongbao.Bucket) *Set { return &t.Sets[t.owner[b]] }

// Set returns the SET called name.
func (t *Map) Set(name string) (*Set, bool) {
	for i := range t.Sets {
		if t.Sets[i].Name == name {
			return &t.Sets[i], true
		}
	}
	return nil, false
}

// Buckets returns the buckets owned by the SET called name.
func (t *Map) Buckets(name string) []hongbao.Bucket {
	var bs []hongbao.Bucket
	for b, i := range t.owner {
		if t.Sets[i].Name == name {
			bs = append(bs, hongbao.Bucket(b))
		}
	}
	return bs
}

// ErrNotInitialised is Load's error before hbctl topology init.
var ErrNotInitialised = errors.New("topology: not initialised (run hbctl topology init)")

// Load reads the current topology from the meta database.
func Load(ctx context.Context, meta *sql.DB) (*Map, error) {
	t := &Map{}
	if err := meta.QueryRowContext(ctx, "SELECT version FROM version WHERE id = 1").Scan(&t.Version); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, ErrNotInitialised
		}
		return nil, fmt.Errorf("topology: version: %w", err)
	}
	rows, err := meta.QueryContext(ctx, "SELECT name, servers, mysql_dsn, replicas, memcached, archive_dsn, state, weight FROM sets ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("topology: sets: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var in Set
		var servers, replicas, mcs string
		if err := rows.Scan(&in.Name, &servers, &in.MySQLDSN, &replicas, &mcs, &in.ArchiveDSN, &in.State, &in.Weight); err != nil {
			return nil, fmt.Errorf("topology: sets: %w", err)
		}
		in.Servers, in.Replicas, in.Memcached = split(servers), splitDSNs(replicas), split(mcs)
		t.Sets = append(t.Sets, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("topology: sets: %w", err)
	}
	return t, loadBuckets(ctx, meta, t)
}

func loadBuckets(ctx context.Context, meta *sql.DB, t *Map) error {
	rows, err := meta.QueryContext(ctx, "SELECT bucket, set_name FROM buckets")
	if err != nil {
		return fmt.Errorf("topology: buckets: %w", err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var b int
		var name string
		if err := rows.Scan(&b, &name); err != nil {
			return fmt.Errorf("topology: buckets: %w", err)
		}
		i := slices.IndexFunc(t.Sets, func(in Set) bool { return in.Name == name })
		if b < 0 || b >= hongbao.Buckets || i < 0 {
			return fmt.Errorf("topology: bucket %d maps to unknown SET %q", b, name)
		}
		t.owner[b] = i
		seen++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("topology: buckets: %w", err)
	}
	if seen != hongbao.Buckets {
		return fmt.Errorf("topology: %d of %d buckets mapped", seen, hongbao.Buckets)
	}
	return nil
}

// splitDSNs reads the replicas column: DSNs one per line (a DSN may hold
// a comma).
func splitDSNs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// JoinDSNs is the replicas column of dsns.
func JoinDSNs(dsns []string) string { return strings.Join(dsns, "\n") }

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// Init records sets in the meta database. The first time it also
// spreads the buckets over the SETs in contiguous ranges; afterwards it
// only updates SET addresses and never moves a bucket (that is a migration).
// The version goes up whenever something changed.
func Init(ctx context.Context, meta *sql.DB, sets []Set) (*Map, error) {
	return InitNoting(ctx, meta, sets, func(string) {})
}

// InitNoting is Init, telling note what it kept of the meta database
// against the configuration.
func InitNoting(ctx context.Context, meta *sql.DB, sets []Set, note func(string)) (*Map, error) {
	if len(sets) == 0 {
		return nil, errors.New("topology: no SETs configured")
	}
	if err := schema.EnsureMeta(ctx, meta); err != nil {
		return nil, err
	}
	tx, err := meta.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("topology: init: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var version int64
	err = tx.QueryRowContext(ctx, "SELECT version FROM version WHERE id = 1 FOR UPDATE").Scan(&version)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("topology: init: %w", err)
	}
	for _, s := range sets {
		if err := keepPrimary(ctx, tx, &s, note); err != nil {
			return nil, err
		}
		if err := upsertSet(ctx, tx, s); err != nil {
			return nil, err
		}
	}
	if version == 0 {
		if err := spread(ctx, tx, sets); err != nil {
			return nil, err
		}
	}
	if err := bump(ctx, tx, version); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("topology: init: %w", err)
	}
	return Load(ctx, meta)
}

// keepPrimary keeps the primary a failover chose. The meta database is
// the truth about a SET's MySQL once a failover changed it: when its
// primary is not the configuration's, s takes the meta database's primary
// and replicas, whatever the file lists, and note says so (reverting the
// failover would send writes to a server that is no longer the primary,
// maybe a replica or a fenced, stale one). When the primaries agree, the
// file's replica list is taken (an operator adding or removing one).
func keepPrimary(ctx context.Context, tx *sql.Tx, s *Set, note func(string)) error {
	var primary, replicas string
	err := tx.QueryRowContext(ctx, "SELECT mysql_dsn, replicas FROM sets WHERE name = ?", s.Name).Scan(&primary, &replicas)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("topology: set %s: %w", s.Name, err)
	}
	if primary == s.MySQLDSN {
		return nil
	}
	note(fmt.Sprintf("SET %s: keeping the meta database's MySQL %s (replicas %s), chosen by a failover; the configuration "+
		"file names %s (replicas %s). Update the file to match, or move the primary with hbctl set failover %s --to DSN "+
		"(after hbctl set rejoin %s)", s.Name, addrs(primary), addrs(replicas), addrs(s.MySQLDSN), addrs(JoinDSNs(s.Replicas)), s.Name, s.Name))
	s.MySQLDSN, s.Replicas = primary, splitDSNs(replicas)
	return nil
}

// addrs lists the host:port of DSNs (JoinDSNs), for messages.
func addrs(dsns string) string {
	var out []string
	for _, d := range splitDSNs(dsns) {
		if cfg, err := mysql.ParseDSN(d); err == nil {
			d = cfg.Addr
		}
		out = append(out, d)
	}
	return "[" + strings.Join(out, " ") + "]"
}

// bump sets the version to one more than version, read FOR UPDATE in tx.
func bump(ctx context.Context, tx *sql.Tx, version int64) error {
	if _, err := tx.ExecContext(ctx, "INSERT INTO version (id, version) VALUES (1, ?) ON DUPLICATE KEY UPDATE version = ?",
		version+1, version+1); err != nil {
		return fmt.Errorf("topology: version: %w", err)
	}
	return nil
}

// upsertSet records s's addresses (Init keeps its state and weight).
func upsertSet(ctx context.Context, tx *sql.Tx, s Set) error {
	if s.Weight <= 0 {
		s.Weight = 1
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sets (name, servers, mysql_dsn, replicas, memcached, archive_dsn, state, weight) VALUES (?,?,?,?,?,?,?,?)
		ON DUPLICATE KEY UPDATE servers = VALUES(servers), mysql_dsn = VALUES(mysql_dsn), replicas = VALUES(replicas), memcached = VALUES(memcached),
		archive_dsn = VALUES(archive_dsn)`,
		s.Name, strings.Join(s.Servers, ","), s.MySQLDSN, JoinDSNs(s.Replicas), strings.Join(s.Memcached, ","), s.ArchiveDSN, Active, s.Weight); err != nil {
		return fmt.Errorf("topology: set %s: %w", s.Name, err)
	}
	return nil
}

// Spread returns the initial map Init writes: bucket b belongs to
// SET b*len(sets)/Buckets, contiguous ranges in the order given.
func Spread(version int64, sets []Set) *Map {
	t := &Map{Version: version, Sets: slices.Clone(sets)}
	slices.SortFunc(t.Sets, func(a, b Set) int { return strings.Compare(a.Name, b.Name) })
	for b := range hongbao.Buckets {
		name := sets[b*len(sets)/hongbao.Buckets].Name
		t.owner[b] = slices.IndexFunc(t.Sets, func(in Set) bool { return in.Name == name })
	}
	return t
}

// spread writes the map of Spread.
func spread(ctx context.Context, tx *sql.Tx, sets []Set) error {
	var q strings.Builder
	q.WriteString("INSERT INTO buckets (bucket, set_name) VALUES ")
	args := make([]any, 0, 2*hongbao.Buckets)
	for b := range hongbao.Buckets {
		if b > 0 {
			q.WriteString(",")
		}
		q.WriteString("(?,?)")
		args = append(args, b, sets[b*len(sets)/hongbao.Buckets].Name)
	}
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		return fmt.Errorf("topology: spread buckets: %w", err)
	}
	return nil
}

// MoveBucket points bucket b at SET to in the meta database and bumps the
// version. It moves no data and no fence: see hbctl topology move.
func MoveBucket(ctx context.Context, meta *sql.DB, b hongbao.Bucket, to string) (int64, error) {
	tx, err := meta.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("topology: move: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var version int64
	if err := tx.QueryRowContext(ctx, "SELECT version FROM version WHERE id = 1 FOR UPDATE").Scan(&version); err != nil {
		return 0, fmt.Errorf("topology: move: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE buckets SET set_name = ? WHERE bucket = ?", to, int(b)); err != nil {
		return 0, fmt.Errorf("topology: move bucket %d: %w", b, err)
	}
	if err := bump(ctx, tx, version); err != nil {
		return 0, err
	}
	return version + 1, tx.Commit()
}

// OpenMeta opens the meta database of dsn, creating the database first
// when create is set. core are the addresses of the core group's members
// (configs.Config.CoreMembers; none: dsn's server alone): the pool follows
// the group's primary through a failover (sqldb.OpenGroup, with opts).
func OpenMeta(ctx context.Context, dsn string, core []string, create bool, opts ...sqldb.GroupOption) (*sql.DB, error) {
	return sqldb.OpenGroup(ctx, dsn, core, 4, create, opts...)
}

// Moves counts the buckets whose SET differs between two maps.
func Moves(from, to *Map) int {
	n := 0
	for b := range hongbao.Buckets {
		if from.Owner(hongbao.Bucket(b)).Name != to.Owner(hongbao.Bucket(b)).Name {
			n++
		}
	}
	return n
}
