// Command hbbench measures the open path: the product's per-packet queue
// with group open and the memcached cap side by side with the designs it
// replaces (one FOR UPDATE transaction per request, optimistic retries, and
// Redis + Lua with an asynchronous writer), in one run on one MariaDB; then
// end to end through the router with wrk, against bare one-hop and two-hop
// Go HTTP ceilings, per core-second of each side's processes; and the
// memory of idle packets.
//
//	hbbench -config configs/dev.yaml -redis 127.0.0.1:26379 -out docs/bench
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

// options are the bench's knobs; the defaults are the scenarios.
type options struct {
	config                    string
	redis                     string
	out                       string
	designs                   string
	scenarios                 string
	hotDur                    time.Duration
	capDur                    time.Duration
	clients                   int
	sweep                     string
	e2e                       string
	wrkConns                  string
	e2eDur                    time.Duration
	rounds                    int
	maxRate                   int
	pids                      string
	rainShares, rainUsers     int
	profileDir, profileAdmins string
	ceilProf                  string
	memory                    int
	cpuprof                   string
	compare                   bool
	crash                     bool
	repeat                    int
}

func main() {
	var o options
	flag.StringVar(&o.config, "config", "configs/dev.yaml", "configuration: SET a's MySQL and memcached are used, and the router for -e2e")
	flag.StringVar(&o.redis, "redis", "127.0.0.1:26379", "Redis for the redis+lua baseline (empty: skip it)")
	flag.StringVar(&o.out, "out", "docs/bench", "directory for results.md and the plot PNG")
	flag.StringVar(&o.designs, "designs", "queue,queue-cold,lock,optimistic,redis+lua", "designs to compare (queue-cold: the product with packets it did not send)")
	flag.StringVar(&o.scenarios, "scenarios", "hot,group,rain", "scenarios to run")
	flag.DurationVar(&o.hotDur, "hot-duration", 8*time.Second, "length of a hot run")
	flag.DurationVar(&o.capDur, "cap", 15*time.Second, "time cap of a group or rain run")
	flag.IntVar(&o.clients, "clients", 2000, "concurrent clients")
	flag.StringVar(&o.sweep, "sweep", "16,64,256,1024,2000", "client counts of the hot plot (empty: no plot)")
	flag.StringVar(&o.e2e, "e2e", "", "router URL for the end-to-end runs, e.g. http://127.0.0.1:8080 (empty: skip)")
	flag.StringVar(&o.wrkConns, "wrk-conns", "64,256", "with -e2e: wrk's connection counts")
	flag.IntVar(&o.rounds, "rounds", 2, "with -e2e: rounds of the four runs (one hop, two hops, ping, hot open), alternating; the table pools them")
	flag.DurationVar(&o.e2eDur, "e2e-duration", 10*time.Second, "with -e2e: length of one wrk run")
	flag.IntVar(&o.maxRate, "max-rate", 25000, "with -e2e: tokens signed per second of a run (more requests than that reuse users)")
	flag.StringVar(&o.pids, "pids", ".run", "with -e2e: directory of the dev cluster's pid files (scripts/dev.sh)")
	flag.IntVar(&o.rainShares, "rain-shares", 20000, "with -e2e: shares of the rain's packet")
	flag.IntVar(&o.rainUsers, "rain-users", 100000, "with -e2e: users of the rain, each trying once, through the router, the two-hop ceiling and in process (0: no rain)")
	flag.StringVar(&o.profileDir, "profile-dir", "", "with -e2e: directory for CPU profiles of the cluster's processes taken through their admin listeners during the first round of each ping and hot open run, and of its MariaDB processes (perf record) during the hot open's, summarized in the results (empty: none)")
	flag.StringVar(&o.profileAdmins, "profile-admins", "router=127.0.0.1:9080,server-a1=127.0.0.1:9081,server-a2=127.0.0.1:9082,server-b1=127.0.0.1:9083,server-b2=127.0.0.1:9084",
		"with -profile-dir: the admin listeners to profile, name=host:port,...")
	backend := flag.String("ceiling-backend", "", "serve as the one-hop ceiling's bare backend on this address (the e2e bench starts it)")
	proxy := flag.String("ceiling-proxy", "", "serve as the two-hop ceiling's bare proxy on this address, to -ceiling-to")
	proxyTo := flag.String("ceiling-to", ceilingBackendAddr, "the backend of -ceiling-proxy")
	flag.StringVar(&o.ceilProf, "ceiling-profiles", "", "with -e2e: directory for CPU profiles of the ceiling processes (proxy.cpu.pprof, backend.cpu.pprof)")
	flag.IntVar(&o.memory, "memory", 100000, "packets for the memory measurement (0: skip)")
	flag.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.BoolVar(&o.compare, "compare", true, "run the in-process design comparison, plot and memory (false: only -e2e)")
	flag.BoolVar(&o.crash, "crash", true, "kill -9 the store (a private MariaDB for ours; a private Redis for redis+lua) in the middle of a rain and count what is lost")
	flag.IntVar(&o.repeat, "repeat", 3, "runs of a group or rain design that finishes in under 10 s; the median is reported")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.cpuprof != "" {
		f, err := os.Create(o.cpuprof)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "hbbench: flag -cpuprofile:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	if *backend != "" || *proxy != "" {
		var err error
		if *backend != "" {
			err = serveBackend(ctx, *backend)
		} else {
			err = serveProxy(ctx, *proxy, *proxyTo)
		}
		if err != nil {
			pprof.StopCPUProfile()
			fmt.Fprintln(os.Stderr, "hbbench:", err)
			os.Exit(1)
		}
		return
	}
	if o.repeat < 1 {
		fmt.Fprintln(os.Stderr, "hbbench: flag -repeat: must be positive")
		os.Exit(2)
	}
	if o.clients < 1 {
		fmt.Fprintln(os.Stderr, "hbbench: flag -clients: must be positive")
		os.Exit(2)
	}
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "hbbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, w io.Writer) error {
	env, err := newBenchEnv(ctx, o)
	if err != nil {
		return err
	}
	defer env.close()
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	var report strings.Builder
	out := io.MultiWriter(w, &report)
	fmt.Fprintf(out, "# hbbench results, %s\n\n", time.Now().Format(time.RFC3339))
	fmt.Fprintf(out, "machine: %s\n\n", machine())
	fmt.Fprintf(out, "MySQL: %s\n\n", env.server(ctx))
	name := "results-e2e.md"
	if o.compare {
		name = "results.md"
		if err := env.compareAll(ctx, o, out); err != nil {
			return err
		}
	}
	if o.e2e != "" {
		if err := endToEnd(ctx, o, env, out); err != nil {
			return err
		}
	}
	return os.WriteFile(o.out+"/"+name, []byte(report.String()), 0o644)
}

// compareAll is the in-process part: designs side by side, the sweep
// behind the plot, and memory.
func (e *benchEnv) compareAll(ctx context.Context, o options, out io.Writer) error {
	results, err := e.compare(ctx, o)
	if err != nil {
		return err
	}
	printTable(out, results)
	fmt.Fprintf(out, "\nratio hot queue/lock: %s\n", ratio(results, "hot", "queue", "lock"))
	if o.crash {
		if err := e.crashes(ctx, out, slices.Contains(split(o.designs), "redis+lua")); err != nil {
			return err
		}
	}
	if o.sweep != "" {
		if err := e.plot(ctx, o, out); err != nil {
			return err
		}
	}
	if o.memory > 0 {
		return e.memoryRun(ctx, o.memory, out)
	}
	return nil
}
