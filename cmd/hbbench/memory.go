package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
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
	// Between the run and the idle timeout only the queues go; the memo of
	// sold-out packets (each packet here has one share) stays.
	per, memo := "n/a", "n/a"
	if live > 0 && m1.HeapAlloc > m2.HeapAlloc {
		per = fmt.Sprintf("%d B", (m1.HeapAlloc-m2.HeapAlloc)/uint64(live))
	}
	if n := d.(*ours).srv.SoldOutRemembered(); n > 0 && m2.HeapAlloc > m0.HeapAlloc {
		memo = fmt.Sprintf("%d packets, %d B each", n, (m2.HeapAlloc-m0.HeapAlloc)/uint64(n))
	}
	fmt.Fprintf(w, "\n## memory: %d packets opened once each (%.0f opens/s)\n\n", n, r.rate())
	fmt.Fprintf(w, "| measure | value |\n|---|---|\n")
	fmt.Fprintf(w, "| packets with a live queue right after the run | %d |\n", live)
	fmt.Fprintf(w, "| heap per live packet queue | %s |\n", per)
	fmt.Fprintf(w, "| packets with a live queue after the idle timeout | %d |\n", q.Stats().Packets)
	fmt.Fprintf(w, "| sold-out packets answered from memory (memo), heap each | %s |\n", memo)
	fmt.Fprintf(w, "| heap before / after the run / after idle queues freed | %.1f / %.1f / %.1f MiB |\n",
		mib(m0.HeapAlloc), mib(m1.HeapAlloc), mib(m2.HeapAlloc))
	rss2 := rss()
	debug.FreeOSMemory()
	fmt.Fprintf(w, "| RSS before / after idle queues freed / after returning free heap to the OS | %s / %s / %s |\n", rss0, rss2, rss())
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
