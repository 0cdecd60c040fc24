package rebalance_test

import (
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// BenchmarkRebalance measures the operator's story on a loaded fleet: SETs
// a and b with -fill packets (and their expiry marks) in every bucket,
// -clients clients sending and opening packets through the router all
// along, each waiting about -think between two requests (0: as fast as
// they can). First -control of that load alone, the same clients with
// nothing moving, to know what the machine answers without a rebalance;
// then SET c is added, a third of the buckets moved onto it (--parallel
// 4), and drained back. It reports the freezes, the copy rate, buckets per
// minute, the time to move a third, and what the clients saw in each phase
// (requests, failures by kind, latency); BENCHMARKS.md records them. Run
// it alone:
//
//	make bench-rebalance
func BenchmarkRebalance(b *testing.B) {
	c := clustertest.Start(b, clustertest.Options{DevGrant: 1_000_000_000, Spare: 1, SweepAfter: 30 * time.Second})
	spare := c.Spares[0].Name
	for _, s := range c.Sets {
		for _, bucket := range ctltest.BucketsOf(b, c, s.Name) {
			fill(b, c, s.Name, bucket, *fillFlag)
		}
	}
	l := &load{think: *thinkFlag}
	stop := make(chan struct{})
	wg := l.run(b, c, *clientsFlag, stop)
	// The clients start together; the control window begins once they
	// spread out over their think times.
	time.Sleep(min(*thinkFlag*2, 10*time.Second))
	controlFrom := time.Now()
	time.Sleep(*controlFlag)
	control := l.window(controlFrom, time.Now())
	c.MustCtl(b, c.AddSetArgs(spare)...)
	c.StartSet(b, spare)
	b.ResetTimer()
	began := time.Now()
	out1 := c.MustCtl(b, "rebalance", "apply", "--parallel", "4", "--grace", "1s")
	third := time.Since(began)
	freezes, rows := movesOf(b, out1)
	began2 := time.Now()
	out2 := c.MustCtl(b, "set", "drain", spare, "--parallel", "4", "--grace", "1s")
	back := time.Since(began2)
	f2, r2 := movesOf(b, out2)
	b.StopTimer()
	moving := l.window(began, time.Now())
	close(stop)
	wg.Wait()
	n := len(freezes)
	freezes = append(freezes, f2...)
	slices.Sort(freezes)
	p := func(q float64) float64 {
		return float64(freezes[min(len(freezes)-1, int(q*float64(len(freezes)-1)+0.5))])
	}
	b.ReportMetric(p(0.5), "freeze-p50-ms")
	b.ReportMetric(p(0.99), "freeze-p99-ms")
	b.ReportMetric(p(1), "freeze-max-ms")
	b.ReportMetric(float64(rows+r2)/(third+back).Seconds(), "rows/s")
	b.ReportMetric(float64(len(freezes))/(third+back).Minutes(), "buckets/min")
	b.ReportMetric(third.Seconds(), "third-s")
	b.ReportMetric(float64(control.failed), "control-errors")
	b.ReportMetric(float64(moving.failed), "moving-errors")
	b.Logf("\n| | moves | took | rows copied | freeze p50 / p99 / max |\n|---|---|---|---|---|\n"+
		"| a third onto %s | %d | %v | %d | |\n| drain %s | %d | %v | %d | |\n| both | %d | %v | %d | %.0f / %.0f / %.0f ms |",
		spare, n, third.Round(time.Second), rows, spare, len(f2), back.Round(time.Second), r2,
		len(freezes), (third + back).Round(time.Second), rows+r2, p(0.5), p(0.99), p(1))
	b.Logf("%d clients, think %v: control (%v, nothing moving): %v", *clientsFlag, *thinkFlag, *controlFlag, control)
	b.Logf("%d clients, think %v: during the rebalance and the drain: %v", *clientsFlag, *thinkFlag, moving)
	b.Logf("failures by kind, whole run:\n%s", l.kindsTable())
	// A wrong answer is a defect at any load, not a measure.
	if len(l.wrong) > 0 {
		diagnose(b, c, l.wrong, out1, out2)
	}
	for i, e := range l.wrong {
		if i == 10 {
			b.Errorf("... %d wrong answers in all", len(l.wrong))
			break
		}
		b.Errorf("wrong answer: %s", e)
	}
}

// The fleet of BenchmarkRebalance: packets in every bucket, and clients
// sending and opening through the router all along (go test -args -fill
// N -clients N -think D -control D).
var (
	fillFlag    = flag.Int("fill", 200, "BenchmarkRebalance: packets in every bucket before the rebalance")
	clientsFlag = flag.Int("clients", 2000, "BenchmarkRebalance: concurrent clients sending and opening meanwhile")
	thinkFlag   = flag.Duration("think", 8*time.Second, "BenchmarkRebalance: each client's pause between two requests (0: none)")
	controlFlag = flag.Duration("control", 60*time.Second, "BenchmarkRebalance: how long the load runs alone before the rebalance")
)

// diagnose logs, for each packet a wrong answer named, where it is: its
// row on every SET, the fences of its bucket, the bucket's moves in the
// journal and the apply lines that moved it; and keeps the processes'
// logs in a directory that outlives the benchmark.
func diagnose(b *testing.B, c *clustertest.Cluster, wrong []string, applies ...string) {
	b.Helper()
	seen := map[hongbao.PacketID]bool{}
	for _, w := range wrong {
		f := strings.Fields(w)
		if len(f) < 2 || f[0] != "open" {
			continue
		}
		id, err := hongbao.ParsePacketID(strings.TrimSuffix(f[1], ":"))
		if err != nil || seen[id] {
			continue
		}
		seen[id] = true
		bucket := id.Bucket()
		packets := id.Table(dbtest.Shanghai(b)).Packets()
		for _, s := range append(slices.Clone(c.Sets), c.Spares...) {
			db := c.DB(s.Name)
			var funding, remaining int
			err := db.QueryRow("SELECT funding, remaining_count FROM "+packets+" WHERE id = ?", id).Scan(&funding, &remaining)
			var fence int
			ferr := db.QueryRow("SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", s.Name, int(bucket)).Scan(&fence)
			b.Logf("packet %s (bucket %d) on SET %s: funding %d, remaining %d, err %v; fence rows %d (%v)", id, bucket, s.Name, funding, remaining, err, fence, ferr)
		}
		meta, err := sql.Open("mysql", c.MetaDSN)
		if err == nil {
			rows, err := meta.Query("SELECT rebalance_id, from_set, to_set, step, freeze_ms, started_at, updated_at, error FROM moves WHERE bucket = ?", int(bucket))
			for err == nil && rows.Next() {
				var r, fz int
				var from, to, step, msg string
				var started, updated sql.NullString
				if err := rows.Scan(&r, &from, &to, &step, &fz, &started, &updated, &msg); err == nil {
					b.Logf("  journal: rebalance %d %s -> %s %s freeze %d ms, %s .. %s %q", r, from, to, step, fz, started.String, updated.String, msg)
				}
			}
			if rows != nil {
				rows.Close()
			}
			meta.Close()
		}
		for _, out := range applies {
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, fmt.Sprintf(`"bucket":%d,`, bucket)) {
					b.Logf("  apply: %s", line)
				}
			}
		}
	}
	keep, err := os.MkdirTemp("", "rebalance-logs-")
	if err != nil {
		b.Log(err)
		return
	}
	for _, p := range c.Processes() {
		if data, err := os.ReadFile(p.Log); err == nil {
			_ = os.WriteFile(filepath.Join(keep, filepath.Base(p.Log)), data, 0o644)
		}
	}
	b.Logf("the processes' logs are kept in %s", keep)
}
