package archive_test

// The real hbarchive binary against a private MariaDB: exit codes (2 usage,
// 3 locked, 1 failure), a run stopped between the verified copy and the
// purge (the command line run in process with a failing AfterCopy knob: the
// binary has no fault hook), and the binary's rerun that finishes it with
// exact counts.

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/archive"
	"github.com/hongbao-dev/hongbao/set/archive/cron"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// day is one local date of one day table, with what the test put in it.
type day struct {
	table hongbao.DayTable
	date  string // yyyymmdd
	sums  dbtest.Sums
}

func (d day) cold() string {
	return fmt.Sprintf("db_%02d_archive.t_%d_%s", int(d.table.Bucket)/10, int(d.table.Bucket)%10, d.date)
}

type fixture struct {
	t     *testing.T
	ctx   context.Context
	m     *dbtest.MariaDB
	db    *sql.DB
	st    *store.Store
	loc   *time.Location
	clock dbtest.Clock
}

// create makes a funded packet at a local time, opens `opens` shares,
// closes it after its hour and delivers its outbox: a settled packet.
func (f *fixture) create(at time.Time, b hongbao.Bucket, seq int, total int64, count, opens int, days map[string]*day) hongbao.PacketID {
	f.t.Helper()
	id, err := hongbao.NewPacketID(at, b, seq)
	if err != nil {
		f.t.Fatal(err)
	}
	f.clock.Set(at)
	if _, _, err := f.st.Create(f.ctx, store.NewPacket{ID: id, Sender: hongbao.UserID(seq + 1), Expiry: time.Hour, Funding: hongbao.Funded,
		Req: hongbao.SendRequest{Total: total, Count: count, Type: hongbao.Random}}); err != nil {
		f.t.Fatal(err)
	}
	var opened int64
	if opens > 0 {
		users := make([]hongbao.UserID, opens)
		for i := range users {
			users[i] = hongbao.UserID(seq*1000 + i + 1)
		}
		f.clock.Set(at.Add(time.Minute))
		batch, err := f.st.OpenBatch(f.ctx, id, users)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, o := range batch.Outcomes {
			if o.Err != nil {
				f.t.Fatal(o.Err)
			}
			opened += o.Result.Amount
		}
	}
	f.clock.Set(at.Add(2 * time.Hour))
	if _, _, err := f.st.Close(f.ctx, id); err != nil {
		f.t.Fatal(err)
	}
	rows, err := f.st.Outbox(f.ctx, 10000)
	if err != nil {
		f.t.Fatal(err)
	}
	var ids []int64
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	if err := f.st.Delivered(f.ctx, ids); err != nil {
		f.t.Fatal(err)
	}
	lt := at.In(f.loc)
	key := fmt.Sprintf("%s %s", id.Table(f.loc).Packets(), lt.Format("20060102"))
	d := days[key]
	if d == nil {
		d = &day{table: id.Table(f.loc), date: lt.Format("20060102")}
		days[key] = d
	}
	d.sums.Packets++
	d.sums.Details += opens
	d.sums.Total += total
	d.sums.Opened += opened
	d.sums.Remaining += total - opened
	return id
}

// run runs the binary with a clean environment plus extra and returns its
// exit code and output.
func runBin(t *testing.T, bin string, extra []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(clustertest.Environ(), extra...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %v: %v", args, err)
	}
	return code, out.String(), errOut.String()
}

func TestHbarchiveBinary(t *testing.T) {
	loc := dbtest.Shanghai(t)
	// The deadline bounds the test's work, not the private MariaDB's
	// bootstrap (minutes on a loaded host).
	m := dbtest.StartMariaDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	db, err := sqldb.Open(m.DSN, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := fence.Own(ctx, db, "a", 1, fence.AllBuckets()); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, ctx: ctx, m: m, db: db, loc: loc}
	f.st = store.New(db, "a", loc, f.clock.Now, mrand.Int64N).WithArchive(db)
	bin := clustertest.Binary(t, "hbarchive")

	days := map[string]*day{}
	at := func(mo time.Month, d, h, mi int) time.Time { return time.Date(2025, mo, d, h, mi, 0, 0, loc) }
	ids := []hongbao.PacketID{
		f.create(at(3, 3, 9, 0), 7, 1, 1000, 10, 10, days),
		f.create(at(3, 3, 10, 0), 7, 2, 500, 5, 2, days),
		f.create(at(3, 3, 11, 0), 7, 3, 300, 3, 0, days),
		f.create(at(3, 3, 12, 0), 123, 4, 2000, 20, 20, days),
		f.create(at(3, 3, 13, 0), 123, 5, 800, 8, 5, days),
		f.create(at(3, 10, 23, 59), 999, 6, 900, 9, 4, days),
	}
	type read struct {
		P    hongbao.Packet
		Recs []hongbao.Record
	}
	reads := func() map[hongbao.PacketID]read {
		out := map[hongbao.PacketID]read{}
		for _, id := range ids {
			p, recs, err := f.st.Packet(ctx, id)
			if err != nil {
				t.Fatalf("read %s: %v", id, err)
			}
			out[id] = read{*p, recs}
		}
		return out
	}
	before := reads()
	if len(days) != 3 {
		t.Fatalf("%d days, want 3", len(days))
	}

	cfg := filepath.Join(t.TempDir(), "hb.yaml")
	clustertest.WriteConfig(t, cfg, clustertest.Config{
		Secret: "hbarchive-test-secret-0123456789", InternalSecret: "hbarchive-test-internal-0123456789", LogLevel: "error",
		WalletDSN: "root@tcp(127.0.0.1:1)/hb_wallet", Extra: "archive:\n  retention_days: 7\n",
		Sets: []clustertest.Set{{Name: "a", Addrs: []string{"127.0.0.1:1"}, DSN: m.DSN, Memcached: "127.0.0.1:1"}},
	})
	snap := dbtest.Checksums(t, db)

	t.Run("usage exits 2", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			says string
		}{
			{nil, "usage: hbarchive ensure|run|status"},
			{[]string{"purge", "--config", cfg}, "usage: hbarchive"},
			{[]string{"run", "--retention-days", "27", "--as-of", "2025-04-19", "--config", cfg}, "1..26"},
			{[]string{"run", "--as-of", "2026-13-01", "--config", cfg}, "--as-of"},
			{[]string{"run", "--set", "nope", "--config", cfg}, "nope"},
		} {
			code, _, stderr := runBin(t, bin, nil, c.args...)
			if code != 2 || !strings.Contains(stderr, c.says) {
				t.Errorf("hbarchive %v: exit %d, stderr %q; want 2 saying %q", c.args, code, stderr, c.says)
			}
		}
		if !reflect.DeepEqual(snap, dbtest.Checksums(t, db)) {
			t.Error("usage errors changed tables")
		}
	})

	t.Run("locked exits 3", func(t *testing.T) {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var got int
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK('hb_archive:a', 0)").Scan(&got); err != nil || got != 1 {
			t.Fatalf("GET_LOCK: %d, %v", got, err)
		}
		code, stdout, stderr := runBin(t, bin, nil, "run", "--as-of", "2025-04-19", "--config", cfg)
		if code != 3 || !strings.HasPrefix(stderr, "hbarchive: SET a: ") ||
			!strings.HasSuffix(stderr, "SET a: another hbarchive run is in progress for this SET\n") || stdout != "" {
			t.Errorf("locked run: exit %d, stdout %q, stderr %q; want 3 and a clear message", code, stdout, stderr)
		}
		t.Run("message names the SET once", func(t *testing.T) {
			if n := strings.Count(stderr, "SET a:"); n != 1 {
				t.Errorf("stderr %q names the SET %d times", stderr, n)
			}
		})
		if !reflect.DeepEqual(snap, dbtest.Checksums(t, db)) {
			t.Error("a locked run changed tables")
		}
		if _, err := conn.ExecContext(ctx, "DO RELEASE_LOCK('hb_archive:a')"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("fault after copy, then rerun", func(t *testing.T) {
		// The binary has no fault hook: the command line runs in process
		// with a failing AfterCopy knob. Neither a usage error nor the lock:
		// hbarchive would exit 1 on it.
		var outBuf, errBuf bytes.Buffer
		err := cron.RunWith(context.Background(), []string{"run", "--as-of", "2025-04-19", "--config", cfg}, &outBuf, &errBuf, clustertest.Environ(),
			cron.Knobs{AfterCopy: func(d store.Day) error {
				return fmt.Errorf("injected fault after copying %s %s", d.Table.Packets(), d.Date.Format(time.DateOnly))
			}})
		stdout := outBuf.String()
		if err == nil || errors.Is(err, cron.ErrUsage) || errors.Is(err, archive.ErrLocked) ||
			!strings.Contains(err.Error(), "injected fault after copying db_00.t_7_03 2025-03-03") {
			t.Fatalf("faulted run: %v, stdout %q; want the fault after copying db_00.t_7_03 (exit 1)", err, stdout)
		}
		first := *days["db_00.t_7_03 20250303"]
		for _, d := range days {
			if got := dbtest.TableSums(t, db, d.table.Packets(), "", ""); got != d.sums {
				t.Errorf("%s after the fault: %+v, want all of %+v still live", d.table.Packets(), got, *d)
			}
		}
		if got := dbtest.TableSums(t, db, first.cold(), "", ""); got != first.sums {
			t.Errorf("%s after the fault: %+v, want the verified copy %+v", first.cold(), got, first)
		}
		for k, d := range days {
			if k != "db_00.t_7_03 20250303" && dbtest.TableExists(t, db, d.cold()) {
				t.Errorf("%s exists though the run stopped before it", d.cold())
			}
		}
		if !reflect.DeepEqual(before, reads()) {
			t.Error("reads changed after the fault")
		}

		code, stdout, stderr := runBin(t, bin, nil, "run", "--as-of", "2025-04-19", "--config", cfg)
		if code != 0 || !strings.Contains(stdout, "SET a: archived 3 days (6 packets), skipped 0, kept 0") {
			t.Fatalf("rerun: exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
		var packets, details int
		for _, d := range days {
			if got := dbtest.TableSums(t, db, d.table.Packets(), "", ""); got.Packets != 0 || got.Details != 0 {
				t.Errorf("%s after the rerun: %+v, want empty", d.table.Packets(), got)
			}
			got := dbtest.TableSums(t, db, d.cold(), "", "")
			if got != d.sums {
				t.Errorf("%s after the rerun: %+v, want exactly %+v", d.cold(), got, *d)
			}
			packets += got.Packets
			details += got.Details
		}
		if packets != 6 || details != 41 {
			t.Errorf("archive holds %d packets and %d shares, want 6 and 41", packets, details)
		}
		if !reflect.DeepEqual(before, reads()) {
			t.Error("archived packets read differently")
		}

		code, stdout, _ = runBin(t, bin, nil, "status", "--as-of", "2025-04-19", "--config", cfg)
		if code != 0 || strings.Count(stdout, " archived ") != 3 || !strings.Contains(stdout, "db_00_archive.t_7_20250303") {
			t.Errorf("status: exit %d\n%s", code, stdout)
		}
	})
}
