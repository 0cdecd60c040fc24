package migrate_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/migrate"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// pair is two private MariaDBs, the source and the target SET of a move.
type pair struct {
	from, to *sql.DB
	b, other hongbao.Bucket
	src      *store.Store // SET "s" on the source, owning b and other
	loc      *time.Location
	clock    *dbtest.Clock
	minter   *hongbao.Minter
}

func startPair(t *testing.T) *pair {
	t.Helper()
	dbtest.Need(t)
	var dbs [2]*dbtest.MariaDB
	var errs [2]error
	var wg sync.WaitGroup
	for i := range dbs {
		wg.Go(func() { dbs[i], errs[i] = dbtest.Launch() })
	}
	wg.Wait()
	for i, m := range dbs {
		if m != nil {
			t.Cleanup(m.Remove)
		}
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
	}
	p := &pair{loc: dbtest.Shanghai(t), clock: &dbtest.Clock{}}
	p.clock.Set(time.Now())
	p.minter = hongbao.NewMinter(p.clock.Now)
	for i, m := range dbs {
		db, err := sqldb.Open(m.DSN, 8)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if i == 0 {
			p.from = db
		} else {
			p.to = db
		}
	}
	p.b = hongbao.Bucket(rand.IntN(hongbao.Buckets))
	p.other = p.b/10*10 + (p.b+1)%10 // same db_xx: shares t_idem
	dbtest.Own(t, p.from, "s", []hongbao.Bucket{p.b, p.other})
	p.src = store.New(p.from, "s", p.loc, p.clock.Now, rand.Int64N)
	return p
}

func (p *pair) move(chunk int) *migrate.Bucket {
	return &migrate.Bucket{B: p.b, From: migrate.Side{Live: p.from, Cold: p.from}, To: migrate.Side{Live: p.to, Cold: p.to}, Chunk: chunk}
}

// send creates a packet in bucket b with an idempotency key and opens
// some of its shares.
func (p *pair) send(t *testing.T, b hongbao.Bucket, opens int) hongbao.PacketID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := p.minter.Next(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.src.Create(ctx, store.NewPacket{ID: id, Sender: dbtest.FreshUser(), Expiry: time.Hour, Funding: hongbao.Funded,
		IdempotencyKey: fmt.Sprintf("k-%d", id), Req: hongbao.SendRequest{Total: 1000, Count: 10, Type: hongbao.Random}}); err != nil {
		t.Fatal(err)
	}
	users := make([]hongbao.UserID, opens)
	for i := range users {
		users[i] = dbtest.FreshUser()
	}
	if opens > 0 {
		if _, err := p.src.OpenBatch(ctx, id, users); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// sendPending creates a packet in bucket p.b whose debit is undecided: it
// has a pending mark.
func (p *pair) sendPending(t *testing.T) hongbao.PacketID {
	t.Helper()
	id, err := p.newPending()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// newPending is sendPending for a goroutine other than the test's.
func (p *pair) newPending() (hongbao.PacketID, error) {
	id, err := p.minter.Next(p.b)
	if err != nil {
		return 0, err
	}
	_, _, err = p.src.Create(context.Background(), store.NewPacket{ID: id, Sender: dbtest.FreshUser(), Expiry: time.Hour, Funding: hongbao.Pending,
		Req: hongbao.SendRequest{Total: 1000, Count: 10, Type: hongbao.Random}})
	return id, err
}

func mustPass(t *testing.T, m *migrate.Bucket) migrate.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := m.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func verify(t *testing.T, m *migrate.Bucket) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, bad, err := m.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return bad
}

// bucketRows counts bucket b's rows in every table of db that holds them.
func bucketRows(t *testing.T, db *sql.DB, b hongbao.Bucket) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, name := range dbtest.TablesLike(t, db, b.DB()+"%", ".") {
		q := "SELECT COUNT(*) FROM " + name
		switch {
		case strings.HasSuffix(name, ".t_idem"):
			q += fmt.Sprintf(" WHERE (packet_id >> 12) & 1023 = %d", int(b))
		case !strings.Contains(name, fmt.Sprintf(".t_%d_", int(b)%10)):
			continue
		}
		out[name] = dbtest.Count(t, db, q)
	}
	for _, name := range []string{"hb_set.expiry", "hb_set.pending"} {
		out[name] = dbtest.Count(t, db, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE (packet_id >> 12) & 1023 = %d", name, int(b)))
	}
	return out
}

// TestMoveCopiesCatchesUpAndVerifies: a first pass copies every row of the
// bucket (two day tables, details, idempotency keys, expiry marks, an
// archive table); rows added and changed on the source afterwards are
// copied by the next pass, which copies only the chunks that changed; a
// row deleted on the source is deleted on the target; the other bucket of
// the same database is left alone; Verify then finds nothing.
func TestMoveCopiesCatchesUpAndVerifies(t *testing.T) {
	p := startPair(t)
	var ids []hongbao.PacketID
	for i := range 12 {
		ids = append(ids, p.send(t, p.b, i%4))
	}
	p.clock.Set(time.Now().Add(-48 * time.Hour)) // an older day table too
	old := p.send(t, p.b, 3)
	p.clock.Set(time.Now())
	p.send(t, p.other, 2) // not moved: its rows share t_idem and hb_set
	archived := archive(t, p.from, p.b, old)

	m := p.move(5)
	st := mustPass(t, m)
	src := bucketRows(t, p.from, p.b)
	if got := bucketRows(t, p.to, p.b); fmt.Sprint(got) != fmt.Sprint(src) {
		t.Fatalf("after the first pass the target holds %v, the source %v", got, src)
	}
	if st.Rows == 0 || st.Differ == 0 || st.Deleted != 0 {
		t.Errorf("first pass: %+v, want rows copied, nothing deleted", st)
	}
	if n := dbtest.Count(t, p.to, fmt.Sprintf("SELECT COUNT(*) FROM %s.t_idem WHERE (packet_id >> 12) & 1023 = %d", p.other.DB(), int(p.other))); n != 0 {
		t.Errorf("the other bucket's %d idempotency keys were copied", n)
	}
	if n := dbtest.Count(t, p.to, "SELECT COUNT(*) FROM "+archived+" WHERE id = ?", old); n != 1 {
		t.Errorf("archive table %s not copied (%d rows of %s)", archived, n, old)
	}
	if bad := verify(t, m); len(bad) != 0 {
		t.Fatalf("verify after the first pass: %v", bad)
	}
	again := mustPass(t, m)
	if again.Differ != 0 || again.Rows != 0 {
		t.Errorf("a pass with nothing changed copied %+v", again)
	}

	// The source keeps serving: new packets, new shares, a deleted row.
	late := p.send(t, p.b, 2)
	ctx := context.Background()
	if _, err := p.src.OpenBatch(ctx, ids[0], []hongbao.UserID{dbtest.FreshUser()}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.from.Exec("DELETE FROM hb_set.expiry WHERE packet_id = ?", ids[1]); err != nil {
		t.Fatal(err)
	}
	if bad := verify(t, m); len(bad) == 0 {
		t.Fatal("verify finds no difference after the source changed")
	}
	ctx2, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	delta, err := m.Delta(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	if delta.Differ == 0 || delta.Differ >= st.Differ+st.Chunks/2 || delta.Deleted == 0 {
		t.Errorf("catch-up pass %+v (first pass %+v): want a few chunks copied and a row deleted", delta, st)
	}
	if bad := verify(t, m); len(bad) != 0 {
		t.Fatalf("verify after catching up: %v", bad)
	}
	got := dbtest.ReadPacket(t, p.to, late)
	if got == nil || len(got.Shares) != 2 {
		t.Errorf("packet %s sent during the move reads %+v on the target", late, got)
	}
	if n := dbtest.Count(t, p.to, "SELECT COUNT(*) FROM hb_set.expiry WHERE packet_id = ?", ids[1]); n != 0 {
		t.Errorf("expiry mark deleted on the source is still on the target")
	}
}

// TestVerifyFindsTampering: a row changed on the target only (a share's
// amount, one fen) is reported by Verify with its table and the money on
// both sides, and the next pass repairs it.
func TestVerifyFindsTampering(t *testing.T) {
	p := startPair(t)
	id := p.send(t, p.b, 3)
	m := p.move(1000)
	mustPass(t, m)
	_, details := dbtest.Tables(t, id)
	if _, err := p.to.Exec("UPDATE "+details+" SET amount = amount + 1 WHERE packet_id = ? LIMIT 1", id); err != nil {
		t.Fatal(err)
	}
	// Delta reads only the source, which did not change: the tampered
	// row stays, for Verify to find.
	if st, err := m.Delta(context.Background()); err != nil || st.Rows != 0 {
		t.Fatalf("delta after tampering with the target: %+v, %v; want nothing copied", st, err)
	}
	bad := verify(t, m)
	if len(bad) != 1 || !strings.HasPrefix(bad[0], details+" ") || !strings.Contains(bad[0], "source 3 rows") {
		t.Fatalf("verify after tampering with %s: %q, want one line naming it", details, bad)
	}
	mustPass(t, m)
	if bad := verify(t, m); len(bad) != 0 {
		t.Fatalf("verify after the repair: %v", bad)
	}
}

// TestDropLeavesOtherBuckets: Drop deletes every row of the bucket from a
// side and none of the other bucket sharing its database and hb_set.
func TestDropLeavesOtherBuckets(t *testing.T) {
	p := startPair(t)
	id := p.send(t, p.b, 2)
	archive(t, p.from, p.b, id)
	p.send(t, p.other, 2)
	before := bucketRows(t, p.from, p.other)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := migrate.Drop(ctx, migrate.Side{Live: p.from, Cold: p.from}, p.b); err != nil {
		t.Fatal(err)
	}
	for name, n := range bucketRows(t, p.from, p.b) {
		if n != 0 {
			t.Errorf("%s keeps %d rows of bucket %d after Drop", name, n, p.b)
		}
	}
	if after := bucketRows(t, p.from, p.other); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("Drop of bucket %d changed bucket %d: %v -> %v", p.b, p.other, before, after)
	}
}

// archive copies packet id and its shares into an archive table of b, as
// an archive run does before it purges, and returns the table's name.
func archive(t *testing.T, db *sql.DB, b hongbao.Bucket, id hongbao.PacketID) string {
	t.Helper()
	a := schema.ArchiveTable{Bucket: b, Date: "20260101"}
	for _, stmt := range schema.ArchiveStatements(a) {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	packets, details := dbtest.Tables(t, id)
	for _, q := range []string{
		"INSERT INTO " + a.Packets() + " SELECT * FROM " + packets + " WHERE id = ?",
		"INSERT INTO " + a.Details() + " SELECT * FROM " + details + " WHERE packet_id = ?",
	} {
		if _, err := db.Exec(q, id); err != nil {
			t.Fatal(err)
		}
	}
	return a.Packets()
}

// TestDeltaSeesTheSameChangeInTwoRows: two packets of one chunk changed
// the same way between a pass and the freeze's Delta (both sends funded;
// both packets closed) are copied, and Verify sees the difference before
// that. With row hashes that are only CRCs the two changes cancelled in
// the chunk's XOR: Delta copied nothing and the packets stayed pending on
// the target, their sends answered.
func TestDeltaSeesTheSameChangeInTwoRows(t *testing.T) {
	p := startPair(t)
	ctx := context.Background()
	var ids []hongbao.PacketID
	for range 3 {
		ids = append(ids, p.sendPending(t))
	}
	m := p.move(1000) // one chunk holds them all
	mustPass(t, m)
	packets, _ := dbtest.Tables(t, ids[0])
	read := func(db *sql.DB, id hongbao.PacketID) (funding, closed int) {
		t.Helper()
		if err := db.QueryRow("SELECT funding, closed FROM "+packets+" WHERE id = ?", id).Scan(&funding, &closed); err != nil {
			t.Fatal(err)
		}
		return funding, closed
	}
	for _, step := range []struct {
		name   string
		change func()
		want   [2]int // funding, closed of the first two packets
	}{
		{"both sends funded", func() {
			for _, id := range ids[:2] {
				if _, err := p.src.Fund(ctx, id, hongbao.Funded); err != nil {
					t.Fatal(err)
				}
			}
		}, [2]int{int(hongbao.Funded), 0}},
		{"both packets closed", func() {
			if _, err := p.from.Exec("UPDATE "+packets+" SET closed = 1 WHERE id IN (?, ?)", ids[0], ids[1]); err != nil {
				t.Fatal(err)
			}
		}, [2]int{int(hongbao.Funded), 1}},
	} {
		t.Run(step.name, func(t *testing.T) {
			step.change()
			if bad := verify(t, m); len(bad) == 0 {
				t.Error("verify finds no difference after two rows changed alike")
			}
			if _, err := m.Delta(ctx); err != nil {
				t.Fatal(err)
			}
			for _, id := range ids[:2] {
				if f, c := read(p.to, id); [2]int{f, c} != step.want {
					t.Errorf("packet %s on the target after Delta: funding %d, closed %d; want %v", id, f, c, step.want)
				}
			}
			if f, _ := read(p.to, ids[2]); f != int(hongbao.Pending) {
				t.Errorf("the unchanged packet %s: funding %d on the target", ids[2], f)
			}
			if bad := verify(t, m); len(bad) != 0 {
				t.Errorf("verify after Delta: %v", bad)
			}
		})
	}
}

// TestDigestTellsNullFromMissing: CONCAT_WS skips NULLs, so without the
// nullable columns' NULL flags a row whose NULL moved from one column to
// another with the same value ((NULL, 'x') -> ('x', NULL), as a lease
// handed on) read the same, and Verify and Delta missed the change. The
// bucket's tables have no nullable column today; a column added later
// must not open that hole.
func TestDigestTellsNullFromMissing(t *testing.T) {
	p := startPair(t)
	id := p.send(t, p.b, 0)
	packets, _ := dbtest.Tables(t, id)
	// The target's table made as the source's first (the copy would make
	// it as the schema has it), then both given two nullable columns.
	var name, ddl string
	if err := p.from.QueryRow("SHOW CREATE TABLE "+packets).Scan(&name, &ddl); err != nil {
		t.Fatal(err)
	}
	dbName, _, _ := strings.Cut(packets, ".")
	if _, err := p.to.Exec("CREATE DATABASE IF NOT EXISTS " + dbName); err != nil {
		t.Fatal(err)
	}
	for _, db := range []*sql.DB{p.from, p.to} {
		for _, stmt := range []string{strings.Replace(ddl, "CREATE TABLE `", "CREATE TABLE IF NOT EXISTS "+dbName+".`", 1),
			"ALTER TABLE " + packets + " ADD COLUMN n1 VARCHAR(8) NULL, ADD COLUMN n2 VARCHAR(8) NULL"} {
			if _, err := db.Exec(stmt); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := p.from.Exec("UPDATE "+packets+" SET n1 = NULL, n2 = 'x' WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
	m := p.move(1000)
	mustPass(t, m)
	if bad := verify(t, m); len(bad) != 0 {
		t.Fatalf("verify after the copy: %v", bad)
	}
	if _, err := p.from.Exec("UPDATE "+packets+" SET n1 = 'x', n2 = NULL WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
	if bad := verify(t, m); len(bad) == 0 {
		t.Error("verify finds no difference after a NULL moved from one column to the other")
	}
	if _, err := m.Delta(context.Background()); err != nil {
		t.Fatal(err)
	}
	var n1, n2 sql.NullString
	if err := p.to.QueryRow("SELECT n1, n2 FROM "+packets+" WHERE id = ?", id).Scan(&n1, &n2); err != nil {
		t.Fatal(err)
	}
	if n1 != (sql.NullString{String: "x", Valid: true}) || n2.Valid {
		t.Errorf("the target after Delta: n1 %v, n2 %v; want x, NULL", n1, n2)
	}
}
