// Package schema is the DDL of every hongbao database, created on demand
// and ahead of time: the double-dimension tables (db_xx.t_y_dd and
// db_xx.t_y_dd_detail, plus each db_xx's idempotency table), hb_set, each
// SET's bucket fence, the archives, the meta and wallet databases. The pools
// and transactions it runs through are store/sqldb's.
package schema

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// packetsDDL: one row per packet. remaining_* are only ever decremented in
// the open transaction; the CHECK makes an over-draw impossible even if code
// were wrong.
const packetsDDL = `CREATE TABLE IF NOT EXISTS %s (
  id               BIGINT       NOT NULL PRIMARY KEY,
  sender           BIGINT       NOT NULL,
  type             VARCHAR(8)   NOT NULL,
  total            BIGINT       NOT NULL,
  count            INT          NOT NULL,
  greeting         VARCHAR(255) NOT NULL DEFAULT '',
  remaining_amount BIGINT       NOT NULL,
  remaining_count  INT          NOT NULL,
  created_at       DATETIME(3)  NOT NULL,
  expires_at       DATETIME(3)  NOT NULL,
  closed           TINYINT      NOT NULL DEFAULT 0,
  funding          TINYINT      NOT NULL DEFAULT 0,
  KEY by_sender (sender, id),
  CONSTRAINT money_left CHECK (remaining_amount >= remaining_count AND remaining_count >= 0
    AND remaining_amount <= total AND remaining_count <= count)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

// audienceDDL: per database, the audiences (hongbao.Audience.String) of
// its packets that have one, keyed by packet: most packets have none, and
// a table of its own leaves the day tables' layout (and every copy of it
// made by SELECT *) as it was.
const audienceDDL = `CREATE TABLE IF NOT EXISTS %s.t_audience (
  packet_id BIGINT NOT NULL PRIMARY KEY,
  users     TEXT   NOT NULL
) ENGINE=InnoDB`

// AudienceStatements creates database db and its audience table.
func AudienceStatements(db string) []string {
	return []string{"CREATE DATABASE IF NOT EXISTS " + db, fmt.Sprintf(audienceDDL, db)}
}

// detailsDDL: one row per opener; the primary key makes a second share for
// the same user impossible.
const detailsDDL = `CREATE TABLE IF NOT EXISTS %s (
  packet_id  BIGINT      NOT NULL,
  user_id    BIGINT      NOT NULL,
  amount     BIGINT      NOT NULL,
  seq        INT         NOT NULL,
  opened_at  DATETIME(3) NOT NULL,
  PRIMARY KEY (packet_id, user_id),
  UNIQUE KEY by_seq (packet_id, seq),
  CONSTRAINT positive_share CHECK (amount >= 1)
) ENGINE=InnoDB`

// idemDDL: per database, so a retried send (same bucket by construction)
// finds its first attempt whatever day it is retried on.
const idemDDL = `CREATE TABLE IF NOT EXISTS %s.t_idem (
  sender     BIGINT        NOT NULL,
  idem_key   VARBINARY(255) NOT NULL,
  packet_id  BIGINT        NOT NULL,
  req_hash   BINARY(32)    NOT NULL,
  created_at DATETIME(3)   NOT NULL,
  PRIMARY KEY (sender, idem_key)
) ENGINE=InnoDB`

// Statements returns the DDL that creates the database and tables of t.
func Statements(t hongbao.DayTable) []string {
	var out []string
	for _, st := range statements(t) {
		out = append(out, st.sql)
	}
	return out
}

// statement is one DDL statement of a day table's and what it creates:
// a table of t.DB() by name, or "" for the database itself.
type statement struct{ table, sql string }

// statements are Statements(t) with what each creates.
func statements(t hongbao.DayTable) []statement {
	return []statement{
		{"", "CREATE DATABASE IF NOT EXISTS " + t.DB()},
		{"t_idem", fmt.Sprintf(idemDDL, t.DB())},
		{tableName(t.Packets()), fmt.Sprintf(packetsDDL, t.Packets())},
		{tableName(t.Details()), fmt.Sprintf(detailsDDL, t.Details())},
		{"t_audience", fmt.Sprintf(audienceDDL, t.DB())},
	}
}

// tableName is the table of "db.table".
func tableName(qualified string) string { return qualified[strings.IndexByte(qualified, '.')+1:] }

// Ensurer creates day tables once per process. It is safe for concurrent use.
type Ensurer struct {
	db   *sql.DB
	done sync.Map // hongbao.DayTable or "hb_set" -> struct{}
}

// NewEnsurer returns an Ensurer creating tables in db.
func NewEnsurer(db *sql.DB) *Ensurer { return &Ensurer{db: db} }

// Ensure creates the tables of t unless this process already did or they
// exist. Each is probed with a read that waits for a CREATE under way on
// it (its metadata lock): information_schema lists a table while another
// session's CREATE still waits to commit (for a semi-sync
// acknowledgement), and a row written into it then, by a caller that took
// it for made, would be hidden from every snapshot opened before that
// CREATE commits (error 1412, "Table definition has changed"), the
// audit's among them.
func (e *Ensurer) Ensure(ctx context.Context, t hongbao.DayTable) error {
	if _, ok := e.done.Load(t); ok {
		return nil
	}
	have, err := e.probe(ctx, t)
	if err != nil {
		return fmt.Errorf("schema: ensure %s: %w", t.Packets(), err)
	}
	return e.create(ctx, t, have)
}

// probe reads each table of t (none of its rows), in the form existing
// answers: the tables that exist, and their database when one does.
func (e *Ensurer) probe(ctx context.Context, t hongbao.DayTable) (map[string]bool, error) {
	have := map[string]bool{}
	for _, st := range statements(t) {
		if st.table == "" {
			continue
		}
		name := t.DB() + "." + st.table
		ok, err := e.exists(ctx, name)
		if sqldb.IsMissingTable(err) { // no database
			return have, nil
		}
		if err != nil {
			return nil, err
		}
		if ok {
			have[name], have[t.DB()+"."] = true, true
		}
	}
	return have, nil
}

// create runs the DDL of what t lacks in have (its database's tables
// that exist, "db.table"): none when it lacks nothing. Every statement is
// written to the binary log, even one IF NOT EXISTS finds done: replicas
// apply it, and a primary killed before a replica acknowledged it holds
// a transaction the replicas lack, which keeps it from rejoining them
// after a failover (it is rebuilt instead). So what exists is not
// created again, by this process or any other (hbctl schema ensure,
// hbarchive, a restarted server).
func (e *Ensurer) create(ctx context.Context, t hongbao.DayTable, have map[string]bool) error {
	for _, st := range statements(t) {
		switch {
		case st.table == "" && have[t.DB()+"."]:
		case st.table != "" && have[t.DB()+"."+st.table]:
		default:
			if _, err := e.db.ExecContext(ctx, st.sql); err != nil {
				return fmt.Errorf("schema: ensure %s: %w", t.Packets(), err)
			}
		}
	}
	e.done.Store(t, struct{}{})
	return nil
}

// existing lists the tables of the day-table databases, as "db.table",
// and each database that holds one as "db.": only names, which MariaDB
// reads without opening a table.
func (e *Ensurer) existing(ctx context.Context) (map[string]bool, error) {
	rows, err := e.db.QueryContext(ctx, `SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema LIKE 'db\_%'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var db, table string
		if err := rows.Scan(&db, &table); err != nil {
			return nil, err
		}
		have[db+"."+table], have[db+"."] = true, true
	}
	return have, rows.Err()
}

// EnsureDays creates the day tables of buckets for the day of from and
// the next ahead days (from's time zone says which day it is), and returns
// how many it ensured: hbarchive's and hbctl schema's ahead-of-time
// creation, so that no first open of a day pays for the DDL. What exists
// is listed once and left alone (create): a table another session is
// creating is listed too, and left to it (writers go through Ensure,
// which waits for it).
func (e *Ensurer) EnsureDays(ctx context.Context, buckets []hongbao.Bucket, from time.Time, ahead int) (int, error) {
	have, err := e.existing(ctx)
	if err != nil {
		return 0, fmt.Errorf("schema: ensure days: %w", err)
	}
	n := 0
	for d := 0; d <= ahead; d++ {
		day := from.AddDate(0, 0, d).Day()
		for _, b := range buckets {
			if err := e.create(ctx, hongbao.DayTable{Bucket: b, Day: day}, have); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// EnsureSet creates the SET's bookkeeping tables (EnsureSet) once.
func (e *Ensurer) EnsureSet(ctx context.Context) error {
	if _, ok := e.done.Load("hb_set"); ok {
		return nil
	}
	if err := EnsureSet(ctx, e.db); err != nil {
		return err
	}
	e.done.Store("hb_set", struct{}{})
	return nil
}

// EnsureAudience creates database db's audience table unless this process
// already did: the packet reads that carry the audience need it, in
// databases made before audiences existed too. It never creates db itself
// (a read must not): without db it fails with MySQL's unknown database,
// and there is no packet to read either.
func (e *Ensurer) EnsureAudience(ctx context.Context, db string) error {
	key := "audience:" + db
	if _, ok := e.done.Load(key); ok {
		return nil
	}
	// Probed first, as Ensure probes: every restarted server reads from
	// every database, and a DDL statement, even one that finds its
	// table, is binlogged (see create).
	exists, err := e.exists(ctx, db+".t_audience")
	if err == nil && !exists {
		_, err = e.db.ExecContext(ctx, fmt.Sprintf(audienceDDL, db))
	}
	if err != nil {
		return fmt.Errorf("schema: ensure %s.t_audience: %w", db, err)
	}
	e.done.Store(key, struct{}{})
	return nil
}

// exists reports whether table name ("db.table") exists, with a read of
// none of its rows that waits for a CREATE of it under way. Without its
// database it fails with MySQL's unknown database.
func (e *Ensurer) exists(ctx context.Context, name string) (bool, error) {
	rows, err := e.db.QueryContext(ctx, "SELECT 1 FROM "+name+" LIMIT 0")
	if err == nil {
		rows.Close()
		return true, nil
	}
	if sqldb.IsNoSuchTable(err) {
		return false, nil
	}
	return false, err
}

// Forget drops the memo of t, for when its tables were dropped under us.
func (e *Ensurer) Forget(t hongbao.DayTable) { e.done.Delete(t) }
