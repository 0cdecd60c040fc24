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
// clients sending and opening packets all along, SET c added, a third of
// the buckets moved onto it (--parallel 4), then drained back, with 2,000
// clients sending and opening packets meanwhile. It reports
// the freezes, the copy rate, buckets per minute and the time to move a
// third; BENCHMARKS.md records them. Run it alone:
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
	l := &load{}
	stop := make(chan struct{})
	wg := l.run(b, c, *clientsFlag, stop)
	c.MustCtl(b, c.AddSetArgs(spare)...)
	c.StartSet(b, spare)
	b.ResetTimer()
	began := time.Now()
	out := c.MustCtl(b, "rebalance", "apply", "--parallel", "4", "--grace", "1s")
	third := time.Since(began)
	freezes, rows := movesOf(b, out)
	began = time.Now()
	out = c.MustCtl(b, "set", "drain", spare, "--parallel", "4", "--grace", "1s")
	back := time.Since(began)
	f2, r2 := movesOf(b, out)
	b.StopTimer()
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
	b.ReportMetric(float64(len(l.errors)), "client-errors")
	b.Logf("\n| | moves | took | rows copied | freeze p50 / p99 / max | opens during |\n|---|---|---|---|---|---|\n"+
		"| a third onto %s | %d | %v | %d | | |\n| drain %s | %d | %v | %d | | |\n| both | %d | %v | %d | %.0f / %.0f / %.0f ms | %d (%d errors) |",
		spare, n, third.Round(time.Second), rows, spare, len(f2), back.Round(time.Second), r2,
		len(freezes), (third + back).Round(time.Second), rows+r2, p(0.5), p(0.99), p(1), l.n.Load(), len(l.errors))
}

// The fleet of BenchmarkRebalance: packets in every bucket, and clients
// sending and opening through the router all along (go test -args -fill
// N -clients N).
var (
	fillFlag    = flag.Int("fill", 200, "BenchmarkRebalance: packets in every bucket before the rebalance")
	clientsFlag = flag.Int("clients", 2000, "BenchmarkRebalance: concurrent clients sending and opening meanwhile")
)
