// Package migrate moves one bucket's rows between two SETs' MySQL while
// the source keeps serving, the way Vitess's MoveTables and VDiff do for
// tables: every table of the bucket is cut into chunks of its packet-ID
// range, each chunk's rows are digested on both sides, and a pass copies
// the chunks whose digests differ. The first pass copies everything; the
// next ones copy what changed meanwhile; a pass under the source's fence
// copies the last delta; Verify then compares every chunk again, copying
// nothing, so a difference it finds is a fault (a row changed on the
// target behind the mover's back, a bug), never a race.
//
// It knows the bucket's tables: its 31 day tables and their details, its
// idempotency keys (in the database's shared t_idem), its expiry and
// pending marks (hb_set), and its archive tables in the cold databases.
// Outbox rows are not moved: they stay with the SET that wrote them,
// whose settler delivers them (see schema.SetStatements).
package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/schema"
)

// Side is one SET's databases: its live MySQL and its cold (archive)
// store, which may be the same pool.
type Side struct {
	Live, Cold *sql.DB
}

// Bucket moves bucket B from one side to the other.
type Bucket struct {
	B        hongbao.Bucket
	From, To Side
	// Chunk is the number of keys per chunk (default 2000).
	Chunk int
	// Parallel is the number of chunks digested at once per side
	// (default 4).
	Parallel int

	mu    sync.Mutex
	cols  map[string]string      // table -> its columns, digest expression
	state map[string]*tableState // table -> the source as the last Pass saw it
	// frozen is what the last Delta compared, for the Verify after it.
	frozen []table
	// beforeCopy, when set (tests), runs before a chunk of the table
	// named is read to be copied.
	beforeCopy func(table string)
}

// Stats are what a pass did.
type Stats struct {
	Tables  int   // tables of the bucket looked at
	Chunks  int   // chunks compared
	Differ  int   // chunks that differed (and were copied)
	Rows    int64 // rows copied
	Deleted int64 // rows deleted on the target (gone from the source)
}

func (s *Stats) add(o Stats) {
	s.Tables += o.Tables
	s.Chunks += o.Chunks
	s.Differ += o.Differ
	s.Rows += o.Rows
	s.Deleted += o.Deleted
}

// table is one table of the bucket.
type table struct {
	name   string   // qualified: db.table
	key    string   // the packet-ID column chunks are ranges of
	shared bool     // other buckets' rows are in it too: filter by bucket
	pk     []string // a shared table's primary key, to delete the bucket's rows by
	cold   bool     // in the cold store
	create []string
}

func (t table) filter(b hongbao.Bucket) string {
	if !t.shared {
		return ""
	}
	return fmt.Sprintf(" AND (%s >> 12) & 1023 = %d", t.key, int(b))
}

func (m *Bucket) chunk() int {
	if m.Chunk > 0 {
		return m.Chunk
	}
	return 2000
}

func (m *Bucket) parallel() int {
	if m.Parallel > 0 {
		return m.Parallel
	}
	return 4
}

func (m *Bucket) db(s Side, t table) *sql.DB {
	if t.cold {
		return s.Cold
	}
	return s.Live
}

// tables lists the bucket's tables that exist on either side.
func (m *Bucket) tables(ctx context.Context) ([]table, error) {
	b := m.B
	db := b.DB()
	y := int(b) % 10
	var out []table
	live := map[string]bool{}
	cold := map[string]bool{}
	for _, s := range []Side{m.From, m.To} {
		for _, q := range []struct {
			db     *sql.DB
			schema string
			into   map[string]bool
		}{{s.Live, db, live}, {s.Cold, db + "_archive", cold}} {
			names, err := listTables(ctx, q.db, q.schema, fmt.Sprintf(`t\_%d\_%%`, y))
			if err != nil {
				return nil, err
			}
			for _, n := range names {
				q.into[q.schema+"."+n] = true
			}
		}
	}
	for day := 1; day <= 31; day++ {
		t := hongbao.DayTable{Bucket: b, Day: day}
		// Each table only where it exists: a send creating a day's tables
		// may have made one and not yet the other.
		ddl := schema.Statements(t)
		if live[t.Packets()] {
			out = append(out, table{name: t.Packets(), key: "id", create: ddl})
		}
		if live[t.Details()] {
			out = append(out, table{name: t.Details(), key: "packet_id", create: ddl})
		}
	}
	for name := range cold {
		if strings.HasSuffix(name, "_detail") {
			continue
		}
		date := name[strings.LastIndex(name, "_")+1:]
		a := schema.ArchiveTable{Bucket: b, Date: date}
		if a.Packets() != name {
			continue // not an archive table of this bucket's naming
		}
		ddl := schema.ArchiveStatements(a)
		out = append(out, table{name: a.Packets(), key: "id", cold: true, create: ddl})
		if cold[a.Details()] {
			out = append(out, table{name: a.Details(), key: "packet_id", cold: true, create: ddl})
		}
	}
	aud, err := m.audienceTables(ctx, db)
	if err != nil {
		return nil, err
	}
	out = append(out, aud...)
	idem := schema.Statements(hongbao.DayTable{Bucket: b, Day: 1})[:2]
	out = append(out,
		table{name: db + ".t_idem", key: "packet_id", shared: true, pk: []string{"sender", "idem_key"}, create: idem},
		table{name: "hb_set.expiry", key: "packet_id", shared: true, pk: []string{"packet_id"}, create: schema.SetStatements},
		table{name: "hb_set.pending", key: "packet_id", shared: true, pk: []string{"packet_id"}, create: schema.SetStatements})
	return out, nil
}

// audienceTables lists the audience tables (live and archive) of database
// db that exist on either side: shared by the database's ten buckets.
func (m *Bucket) audienceTables(ctx context.Context, db string) ([]table, error) {
	var out []table
	for _, c := range []struct {
		schema string
		cold   bool
	}{{db, false}, {db + "_archive", true}} {
		found := false
		for _, s := range []Side{m.From, m.To} {
			pool := s.Live
			if c.cold {
				pool = s.Cold
			}
			names, err := listTables(ctx, pool, c.schema, `t\_audience`)
			if err != nil {
				return nil, err
			}
			found = found || len(names) > 0
		}
		if found {
			out = append(out, table{name: c.schema + ".t_audience", key: "packet_id", shared: true, cold: c.cold,
				pk: []string{"packet_id"}, create: schema.AudienceStatements(c.schema)})
		}
	}
	return out, nil
}

// listTables lists the tables of database schemaName whose names are LIKE
// pattern.
func listTables(ctx context.Context, db *sql.DB, schemaName, pattern string) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_name LIKE ?",
		schemaName, pattern)
	if err != nil {
		return nil, fmt.Errorf("migrate: list tables of %s: %w", schemaName, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}
