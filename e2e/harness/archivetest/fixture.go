// Package archivetest is the archival cron's test harness, the way
// net/http/httptest is the HTTP server's: a Fixture is one private MariaDB
// with SET "a" owning every bucket, a store on a settable clock, and a
// model of every packet the test created, so every count and sum a test
// checks covers everything in the server.
//
// Packets are created with IDs minted in the past through the real store,
// opened, closed and refunded through it (packets.go), and the harness
// reads the tables with its own SQL (tables.go): the ID ranges of a local
// day are recomputed here from the layout in docs/ARCHITECTURE.md, not
// taken from the store. Named data sets (datasets.go) and the SET's
// archive lock held on purpose (locks.go) are shared by the tests of
// archive.Archiver and of the archive command line.
//
//	f := archivetest.New(t)
//	ids := f.FourDays()
//	f.Settle(f.Funded(ids)...)
//	sum, err := f.Archiver(7).Run(f.Ctx, f.Date("2025-04-19"), false)
//	f.CheckArchived(f.Model(ids...))
package archivetest

import (
	"context"
	"database/sql"
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/archive"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Fixture is one private MariaDB with SET "a" owning every bucket, a store
// on a settable clock, and a model of every packet created through it.
type Fixture struct {
	// Ctx bounds the test (90 s from the server's start): a hung query
	// fails it instead of hanging the test binary.
	Ctx context.Context
	// MariaDB is the private server; its DSN selects no database.
	MariaDB *dbtest.MariaDB
	// DB is SET a's MySQL, which also holds the cold store (the default
	// when archive_dsn is not set).
	DB  *sql.DB
	Loc *time.Location // Asia/Shanghai, the cluster's time zone
	// Store is SET a's store on Clock, reading archived days from DB.
	Store *store.Store
	// Clock is the store's clock: Create, ClosePackets and Deliver set it.
	Clock dbtest.Clock

	t    testing.TB
	mu   sync.Mutex
	seq  int
	user int64
	pk   map[hongbao.PacketID]*Packet
}

// startMu serialises the starts of private MariaDB servers in one test
// binary: a bootstrap is heavy and parallel ones on a small host fail.
var startMu sync.Mutex

// startMariaDB starts a private MariaDB, one at a time in this test binary.
func startMariaDB(t testing.TB) *dbtest.MariaDB {
	t.Helper()
	startMu.Lock()
	defer startMu.Unlock()
	return dbtest.StartMariaDB(t)
}

// New starts a private MariaDB whose SET a owns every bucket and returns a
// fixture on it; everything is stopped and removed when the test ends.
func New(t testing.TB) *Fixture {
	t.Helper()
	loc := dbtest.Shanghai(t)
	m := startMariaDB(t)
	// The budget starts once the server is up: parallel tests queue for
	// their starts.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	db, err := sqldb.Open(m.DSN, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := fence.Own(ctx, db, "a", 1, fence.AllBuckets()); err != nil {
		t.Fatal(err)
	}
	f := &Fixture{t: t, Ctx: ctx, MariaDB: m, DB: db, Loc: loc, user: 1000, pk: map[hongbao.PacketID]*Packet{}}
	f.Store = store.New(db, "a", loc, f.Clock.Now, mrand.Int64N).WithArchive(db)
	return f
}

// At is a local time in Asia/Shanghai.
func (f *Fixture) At(y int, mo time.Month, d, h, mi, s, ms int) time.Time {
	return time.Date(y, mo, d, h, mi, s, ms*int(time.Millisecond), f.Loc)
}

// Date is local midnight of a yyyy-mm-dd date.
func (f *Fixture) Date(s string) time.Time {
	f.t.Helper()
	d, err := time.ParseInLocation(time.DateOnly, s, f.Loc)
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

// Archiver returns an Archiver of SET a keeping retention days, with the
// live and cold store in the same private MariaDB.
func (f *Fixture) Archiver(retention int) *archive.Archiver {
	return &archive.Archiver{Set: "a", Store: f.Store, Live: f.DB, Cold: f.DB, Loc: f.Loc, Log: zap.NewNop(), Retention: retention}
}

// Config writes a YAML configuration with SET a on the private MariaDB, no
// meta database (unless extra names one), archive.retention_days retention
// and archive.ahead_days 2, and returns its path. extra is more top-level
// YAML, written as is.
func (f *Fixture) Config(retention int, extra string) string {
	f.t.Helper()
	path := filepath.Join(f.t.TempDir(), "hb.yaml")
	clustertest.WriteConfig(f.t, path, clustertest.Config{
		Secret: "archive-test-secret-0123456789", InternalSecret: "archive-test-internal-0123456789", LogLevel: "error",
		WalletDSN: "root@tcp(127.0.0.1:1)/hb_wallet",
		Extra:     fmt.Sprintf("archive:\n  retention_days: %d\n  ahead_days: 2\n%s", retention, extra),
		Sets:      []clustertest.Set{{Name: "a", Addrs: []string{"127.0.0.1:1"}, DSN: f.MariaDB.DSN, Memcached: "127.0.0.1:1"}},
	})
	return path
}

// Reports indexes a run's day reports by "table date", as in
// "db_00.t_7_03 2025-03-03".
func Reports(sum archive.Summary) map[string]archive.DayReport {
	out := map[string]archive.DayReport{}
	for _, r := range sum.Days {
		out[r.Table+" "+r.Date] = r
	}
	return out
}
