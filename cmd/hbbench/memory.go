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
	"github.com/hongbao-dev/hongbao/queue"
)

// memoryRun opens n packets once each through the queue design and reports
// the heap held per packet while its queue is alive, what the server keeps
// of packets in memory once their queues are freed (half the packets have
// one share, so the open sells them out: the memo; half have two, so they
// stay live: known), and the process RSS.
func (e *benchEnv) memoryRun(ctx context.Context, n int, w io.Writer) error {
	fmt.Printf("memory: %d packets, one open each...\n", n)
	d, done, err := e.newDesign("queue", 200, "")
	if err != nil {
		return err
	}
	defer done()
	defer d.close()
	srv := d.(*ours).srv
	q := srv.Queue()
	soldOut, err := newPackets(e.minter, n/2, 10, 1, hongbao.Fixed)
	if err != nil {
		return err
	}
	live, err := newPackets(e.minter, n-n/2, 20, 2, hongbao.Fixed)
	if err != nil {
		return err
	}
	ps := append(soldOut, live...)
	if err := seed(ctx, e.admin, e.loc, ps); err != nil {
		return err
	}
	var m0, m1, m2, m3 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	rss0 := rss()
	r := drive(ctx, d, 200, time.Hour, list(e.onceEach(soldOut)))
	runtime.GC()
	runtime.ReadMemStats(&m1)
	queues := int(q.Stats().Packets)
	idle(q)
	runtime.GC()
	runtime.ReadMemStats(&m2)
	r2 := drive(ctx, d, 200, time.Hour, list(e.onceEach(live)))
	idle(q)
	runtime.GC()
	runtime.ReadMemStats(&m3)
	r.lat, r.answers, r.opened, r.openedSum = append(r.lat, r2.lat...), r.answers+r2.answers, r.opened+r2.opened, r.openedSum+r2.openedSum
	r.took += r2.took
	fmt.Fprintf(w, "\n## memory: %d packets opened once each (%.0f opens/s)\n\n", n, r.rate())
	fmt.Fprintf(w, "| measure | value |\n|---|---|\n")
	fmt.Fprintf(w, "| packets with a live queue right after the run | %d |\n", queues)
	fmt.Fprintf(w, "| heap per live packet queue | %s |\n", perPacket(m1.HeapAlloc, m2.HeapAlloc, queues))
	fmt.Fprintf(w, "| packets with a live queue after the idle timeout | %d |\n", q.Stats().Packets)
	fmt.Fprintf(w, "| sold-out packets answered from memory (memo), heap each | %d, %s |\n",
		srv.SoldOutRemembered(), perPacket(m2.HeapAlloc, m0.HeapAlloc, srv.SoldOutRemembered()))
	fmt.Fprintf(w, "| live packets known in memory (one share each), heap each | %d, %s |\n",
		srv.KnownLive(), perPacket(m3.HeapAlloc, m2.HeapAlloc, srv.KnownLive()))
	fmt.Fprintf(w, "| heap before / after the run / after idle queues freed / after the live packets | %.1f / %.1f / %.1f / %.1f MiB |\n",
		mib(m0.HeapAlloc), mib(m1.HeapAlloc), mib(m2.HeapAlloc), mib(m3.HeapAlloc))
	rss2 := rss()
	debug.FreeOSMemory()
	fmt.Fprintf(w, "| RSS before / after idle queues freed / after returning free heap to the OS | %s / %s / %s |\n", rss0, rss2, rss())
	fmt.Fprintf(w, "| invariants | %s |\n", check(ctx, e.admin, e.loc, ps, r))
	return cleanup(ctx, e.admin, e.loc, ps)
}

// onceEach is one open of every packet of ps by a fresh user.
func (e *benchEnv) onceEach(ps []*hongbao.Packet) []job {
	js := make([]job, len(ps))
	for i, p := range ps {
		js[i] = job{p.ID, e.nextUser()}
	}
	return js
}

// idle waits (at most 30 s) for every packet queue of q to be freed.
func idle(q interface{ Stats() queue.Stats }) {
	deadline := time.Now().Add(30 * time.Second)
	for q.Stats().Packets > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
}

// perPacket is (more - less) / n bytes, or n/a.
func perPacket(more, less uint64, n int) string {
	if n <= 0 || more <= less {
		return "n/a"
	}
	return fmt.Sprintf("%d B", (more-less)/uint64(n))
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
