package main_test

import (
	"flag"
	"slices"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/router/clustertest"
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
		for _, bucket := range bucketsOf(b, c, s.Name) {
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
	out := c.MustCtl(b, "rebalance", "apply", "--parallel", "4", "--grace", "1s")
	third := time.Since(began)
	freezes, rows := movesOf(b, out)
	began2 := time.Now()
	out = c.MustCtl(b, "set", "drain", spare, "--parallel", "4", "--grace", "1s")
	back := time.Since(began2)
	f2, r2 := movesOf(b, out)
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
