package failover

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// TestPublishChecksPrimary: two failover actors read SET s's group while
// its primary is P; one publishes R1. The other's publish of R2 must fail
// (compare-and-set on the primary it started from), naming what is
// published, and leave R1 published.
func TestPublishChecksPrimary(t *testing.T) {
	ctx := context.Background()
	name := dbtest.UniqueName("s")
	p, r1, r2 := fakeDSN(1001), fakeDSN(1002), fakeDSN(1003)
	meta := testMeta(t, fakeSet(name, p, r1, r2))
	first, err := SetGroup(ctx, meta, name)
	if err != nil {
		t.Fatal(err)
	}
	second, err := SetGroup(ctx, meta, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.publish(ctx, r1, []string{r2, p}); err != nil {
		t.Fatal(err)
	}
	_, err = second.publish(ctx, r2, []string{r1, p})
	if err == nil {
		t.Fatalf("a second failover from %s published %s over %s: two primaries published in turn", sqldb.Addr(p), sqldb.Addr(r2), sqldb.Addr(r1))
	}
	if !strings.Contains(err.Error(), sqldb.Addr(r1)) || !strings.Contains(err.Error(), sqldb.Addr(p)) {
		t.Errorf("the refusal does not say what is published (%s) and what the failover started from (%s): %v", sqldb.Addr(r1), sqldb.Addr(p), err)
	}
	if got := metaPrimary(t, meta, name); got != r1 {
		t.Errorf("SET %s's primary is %s; want %s (the first publish)", name, got, r1)
	}
}

// TestCoreStampChecksEpoch: two core failovers start from epoch E; the one
// that read the members first promotes R1 and stamps its epoch. The
// other, stamping R2 later, must not overtake it with a higher epoch
// (every process would move to R2, away from a primary that may have
// acknowledged commits): its stamp is refused, naming R1's epoch.
func TestCoreStampChecksEpoch(t *testing.T) {
	ctx := context.Background()
	ms := startMariaDBs(t, 3)
	var dsns []string
	for _, m := range ms {
		dsns = append(dsns, m.DSN)
	}
	const e = 1000
	for _, m := range ms {
		if err := sqldb.StampEpoch(ctx, dbtest.Open(t, m.DSN, 1), e, sqldb.Addr(ms[0].DSN)); err != nil {
			t.Fatal(err)
		}
	}
	out := &syncBuffer{}
	r := testReparenter(configs.Replication{AdminUser: "root"}, out)
	members := CoreMembers{DSNs: dsns, Primary: 0, Epoch: e}
	first := r.coreGroup(members, nil)
	time.Sleep(5 * time.Millisecond) // the second's epoch (the clock in ms) is above the first's
	second := r.coreGroup(members, nil)
	if err := first.stamp(ctx, dbtest.Open(t, ms[1].DSN, 1), ms[1].DSN); err != nil {
		t.Fatal(err)
	}
	r1, _, err := sqldb.Epoch(ctx, dbtest.Open(t, ms[1].DSN, 1))
	if err != nil {
		t.Fatal(err)
	}
	err = second.stamp(ctx, dbtest.Open(t, ms[2].DSN, 1), ms[2].DSN)
	r2, _, _ := sqldb.Epoch(ctx, dbtest.Open(t, ms[2].DSN, 1))
	if err == nil {
		t.Fatalf("the second core failover stamped epoch %d on %s over epoch %d on %s: two promotions from epoch %d", r2, sqldb.Addr(ms[2].DSN), r1, sqldb.Addr(ms[1].DSN), e)
	}
	if r2 != e || !strings.Contains(err.Error(), strconv.FormatInt(r1, 10)) {
		t.Errorf("refused (%v) with epoch %d on %s; want epoch %d left and the refusal naming epoch %d", err, r2, sqldb.Addr(ms[2].DSN), e, r1)
	}
}

// startMariaDBs starts n private MariaDBs at once.
func startMariaDBs(t *testing.T, n int) []*dbtest.MariaDB {
	t.Helper()
	dbtest.Need(t)
	ms := make([]*dbtest.MariaDB, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range ms {
		wg.Go(func() { ms[i], errs[i] = dbtest.Launch() })
	}
	wg.Wait()
	for _, m := range ms {
		if m != nil {
			t.Cleanup(m.Remove)
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestFailoverRerunPublishesPromoted: a failover of SET s (a primary and
// two replicas, some writes) promotes a replica and repoints the other,
// then dies before publishing (the hook). Run again, it must publish the
// replica already promoted and never promote the other one: one writable
// member, the other replicating from it.
func TestFailoverRerunPublishesPromoted(t *testing.T) {
	ctx := context.Background()
	name := dbtest.UniqueName("s")
	g, meta, cfg := replicatedSet(t, name, 2)
	writeSome(t, g, 5)
	out := &syncBuffer{}
	f := testFailover(t, meta, name, cfg, out)
	f.r.Hook = func(step string) error {
		if step == StepPublish {
			return errors.New("killed before publishing (test hook)")
		}
		return nil
	}
	if err := f.run(ctx, Options{}); err == nil {
		t.Fatalf("the first run published despite its hook:\n%s", out)
	}
	var promoted, other *dbtest.MariaDB
	for _, r := range g.Replicas {
		if !readOnly(t, r) {
			promoted = r
		} else {
			other = r
		}
	}
	if promoted == nil || other == nil {
		t.Fatalf("after the first run: want one replica promoted (writable), the other read-only:\n%s", out)
	}
	t.Logf("first run (promoted %s, not published):\n%s", sqldb.Addr(promoted.DSN), out)

	out2 := &syncBuffer{}
	f2 := testFailover(t, meta, name, cfg, out2)
	err := f2.run(ctx, Options{})
	t.Logf("second run: %v\n%s", err, out2)
	if !readOnly(t, other) {
		t.Fatalf("the second run promoted %s too: two writable primaries (%s and %s)", sqldb.Addr(other.DSN), sqldb.Addr(promoted.DSN), sqldb.Addr(other.DSN))
	}
	if err != nil {
		t.Fatalf("the second run: %v", err)
	}
	if got := metaPrimary(t, meta, name); got != promoted.AppDSN() {
		t.Errorf("published %s; want %s, promoted by the first run", sqldb.Addr(got), sqldb.Addr(promoted.DSN))
	}
	st, err := replication.ReplicaStatus(ctx, dbtest.Open(t, other.DSN, 1))
	if err != nil || st.MasterPort != promoted.Port || st.IORunning != "Yes" {
		t.Errorf("%s after the second run: %+v %v; want replicating from %s", sqldb.Addr(other.DSN), st, err, sqldb.Addr(promoted.DSN))
	}
}

// writeSome commits n rows on g's primary as the application and waits
// until every replica applied them.
func writeSome(t *testing.T, g *dbtest.Group, n int) {
	t.Helper()
	writeRows(t, g.Primary, n)
	ctx := context.Background()
	pos, err := replication.BinlogPos(ctx, dbtest.Open(t, g.Primary.DSN, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range g.Replicas {
		if err := replication.WaitApplied(ctx, dbtest.Open(t, r.DSN, 1), pos, 30*time.Second); err != nil {
			t.Fatalf("replica %s: %v", sqldb.Addr(r.DSN), err)
		}
	}
}

// writeRows commits n rows on m as the application.
func writeRows(t *testing.T, m *dbtest.MariaDB, n int) {
	t.Helper()
	db := dbtest.Open(t, m.AppDSN(), 1)
	for _, q := range []string{"CREATE DATABASE IF NOT EXISTS h23", "CREATE TABLE IF NOT EXISTS h23.t (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if _, err := db.Exec("INSERT INTO h23.t (v) VALUES (?)", i); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFailoverStopsWhenLockLost: SET s's failover holds the SET's
// failover lock; after it fenced the old primary, the lock's meta
// connection is killed (as a core failover's fence kills every
// application connection of the old core primary) and another actor
// takes the lock. The failover must stop before its next step: no
// replica stopped receiving, none promoted, nothing published.
func TestFailoverStopsWhenLockLost(t *testing.T) {
	ctx := context.Background()
	name := dbtest.UniqueName("s")
	g, meta, cfg := replicatedSet(t, name, 2)
	writeSome(t, g, 3)
	lock, err := topology.LockFailover(ctx, meta, name)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	out := &syncBuffer{}
	f := testFailover(t, meta, name, cfg, out)
	f.lock = lock
	var other *topology.FailoverLock
	f.r.Hook = func(step string) error {
		if step != StepStop {
			return nil
		}
		killLockHolder(t, meta, "hb_failover:"+name)
		other, err = topology.LockFailover(ctx, meta, name)
		if err != nil {
			t.Errorf("another actor could not take the lock after its holder's connection was killed: %v", err)
		}
		return nil
	}
	err = f.run(ctx, Options{})
	t.Logf("failover: %v\n%s", err, out)
	if other != nil {
		defer other.Release()
	}
	if err == nil || !errors.Is(err, topology.ErrLockLost) {
		t.Errorf("the failover went on after losing its lock to another actor: %v; want topology.ErrLockLost", err)
	}
	for _, r := range g.Replicas {
		if !readOnly(t, r) {
			t.Errorf("replica %s was promoted after the lock was lost", sqldb.Addr(r.DSN))
		}
		st, err := replication.ReplicaStatus(ctx, dbtest.Open(t, r.DSN, 1))
		if err != nil || st.IORunning != "Yes" {
			t.Errorf("replica %s: %+v %v; want still receiving (not stopped after the lock was lost)", sqldb.Addr(r.DSN), st, err)
		}
	}
	if got := metaPrimary(t, meta, name); got != g.Primary.AppDSN() {
		t.Errorf("published %s after the lock was lost", sqldb.Addr(got))
	}
}

// killLockHolder kills the meta connection holding user lock key, as a
// fence kills the application's connections (only that one: the meta
// database is on the shared test MariaDB).
func killLockHolder(t *testing.T, meta *sql.DB, key string) {
	t.Helper()
	var id sql.NullInt64
	if err := meta.QueryRow("SELECT IS_USED_LOCK(?)", key).Scan(&id); err != nil || !id.Valid {
		t.Fatalf("lock %s: holder %v, %v", key, id, err)
	}
	if _, err := meta.Exec("KILL CONNECTION " + strconv.FormatInt(id.Int64, 10)); err != nil {
		t.Fatal(err)
	}
	for range 100 { // KILL returns before the lock is dropped
		if err := meta.QueryRow("SELECT IS_USED_LOCK(?)", key).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if !id.Valid {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("lock %s still held by connection %d after its kill", key, id.Int64)
}

// TestCoreFailoverExcludesWatch: while another actor (core watch's
// failover) holds the core failover lock, hbctl core failover refuses
// and touches nothing: the core primary is not fenced. The lock lives on
// the members: it stays held when the holder's connection to the core
// primary is killed (a fence, or the primary's death), and another
// actor still cannot take it.
func TestCoreFailoverExcludesWatch(t *testing.T) {
	ctx := context.Background()
	ms := startMariaDBs(t, 2)
	path := filepath.Join(t.TempDir(), "core.yaml")
	cfg := fmt.Sprintf(`meta_dsn: "root@tcp(127.0.0.1:%d)/hb_meta"
wallet_dsn: "root@tcp(127.0.0.1:%d)/hb_wallet"
core:
  replicas: ["127.0.0.1:%d"]
secret: "0123456789abcdef0123"
internal_secret: "fedcba9876543210fedc"
replication:
  admin_user: root
`, ms[0].Port, ms[0].Port, ms[1].Port)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	watcher := testReparenter(configs.Replication{AdminUser: "root"}, out)
	held, err := watcher.LockCore(ctx, []string{ms[0].DSN, ms[1].DSN})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()

	loaded, err := configs.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = testReparenter(loaded.Replication, out).FailoverCore(ctx, loaded, "", false)
	t.Logf("hbctl core failover while the lock is held: %v\n%s", err, out)
	if !errors.Is(err, ErrCoreBusy) {
		t.Errorf("core failover beside a holder of the core lock: %v; want ErrCoreBusy", err)
	}
	if readOnly(t, ms[0]) {
		t.Fatalf("core failover fenced the core primary while another actor held the core lock")
	}

	// The holder's connection to the primary is killed: it holds the
	// lock on the replica still, and a newcomer is refused there.
	killLockHolder(t, dbtest.Open(t, ms[0].DSN, 1), coreLockKey)
	if err := held.Held(ctx); err != nil {
		t.Errorf("the lock after its connection to the primary was killed: %v; want held (on the replica)", err)
	}
	if l, err := watcher.LockCore(ctx, []string{ms[0].DSN, ms[1].DSN}); !errors.Is(err, ErrCoreBusy) {
		if l != nil {
			l.Release()
		}
		t.Errorf("a second actor took the core lock while the first holds it on the replica: %v", err)
	}
	held.Release()
	l, err := watcher.LockCore(ctx, []string{ms[0].DSN, ms[1].DSN})
	if err != nil {
		t.Fatalf("the core lock once released: %v", err)
	}
	l.Release()
}
