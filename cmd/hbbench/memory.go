package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// memoryRun opens n packets once each through the queue design and reports
// the heap held per packet while its queue is alive, and the process RSS
// once the idle queues are freed.
func (e *benchEnv) memoryRun(ctx context.Context, n int, w io.Writer) error {
	fmt.Printf("memory: %d packets, one open each...\n", n)
	d, done, err := e.newDesign("queue", 200, "")
	if err != nil {
		return err
	}
	defer done()
	defer d.close()
	q := d.(*ours).srv.Queue()
	ps, err := newPackets(e.minter, n, 10, 1, hongbao.Fixed)
	if err != nil {
		return err
	}
	if err := seed(ctx, e.admin, e.loc, ps); err != nil {
		return err
	}
	js := make([]job, n)
	for i, p := range ps {
		js[i] = job{p.ID, e.nextUser()}
	}
	var m0, m1, m2 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	rss0 := rss()
	r := drive(ctx, d, 200, time.Hour, list(js))
	runtime.GC()
	runtime.ReadMemStats(&m1)
	live := q.Stats().Packets
	deadline := time.Now().Add(30 * time.Second)
	for q.Stats().Packets > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	runtime.GC()
	runtime.ReadMemStats(&m2)
	per := "n/a"
	if live > 0 && m1.HeapAlloc > m0.HeapAlloc {
		per = fmt.Sprintf("%d B", (m1.HeapAlloc-m0.HeapAlloc)/uint64(live))
	}
	fmt.Fprintf(w, "\n## memory: %d packets opened once each (%.0f opens/s)\n\n", n, r.rate())
	fmt.Fprintf(w, "| measure | value |\n|---|---|\n")
	fmt.Fprintf(w, "| packets with a live queue right after the run | %d |\n", live)
	fmt.Fprintf(w, "| heap per live packet queue | %s |\n", per)
	fmt.Fprintf(w, "| packets with a live queue after the idle timeout | %d |\n", q.Stats().Packets)
	fmt.Fprintf(w, "| heap before / after the run / after idle queues freed | %.1f / %.1f / %.1f MiB |\n",
		mib(m0.HeapAlloc), mib(m1.HeapAlloc), mib(m2.HeapAlloc))
	fmt.Fprintf(w, "| RSS before / after idle queues freed | %s / %s |\n", rss0, rss())
	fmt.Fprintf(w, "| invariants | %s |\n", check(ctx, e.admin, e.loc, ps, r))
	return cleanup(ctx, e.admin, e.loc, ps)
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func rss() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "n/a"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:"))
		}
	}
	return "n/a"
}
