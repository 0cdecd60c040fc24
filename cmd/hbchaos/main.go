// Command hbchaos is hongbao's chaos run against the dev cluster
// (scripts/dev.sh up): some 2,000 concurrent clients send packets (small
// ones and activity packets of hundreds or thousands of shares) and open
// them through the router for a bounded time, while a scheduler kills
// processes and databases with SIGKILL at random moments (SET servers, the
// router, settlers, the archiver, a SET's MariaDB, memcached) and pauses a
// MariaDB with SIGSTOP/SIGCONT. The dev cluster's supervisor starts killed
// processes again; hbchaos starts MariaDB and memcached again with
// scripts/dev.sh infra. A SET primary's kill followed by `hbctl set
// failover` is tried only when the configuration names replicas.
//
// Afterwards it holds the system to the clients' own record of every
// acknowledged answer: each acknowledged open is in its packet's detail
// with its amount, no user twice, shares + remaining = total, each opener
// credited exactly its shares, each sender debited exactly its packets and
// refunded the rest, and hbctl verify passes. It prints a table (load,
// faults by kind with their recovery times, acknowledged answers, lost,
// doubled) and exits 1 when anything acknowledged was lost or doubled.
//
//	make chaos                   # the full run, into RELIABILITY.md
//	.run/bin/hbchaos -clients 2000 -duration 3m -markdown RELIABILITY.md
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/devhosts"
	"github.com/hongbao-dev/hongbao/e2e/harness/devrun"
)

// verifyRun is one hbctl verify during the run: when, and "ok",
// "violation" or "error".
type verifyRun struct {
	at     time.Time
	result string
}

// options are the command line.
type options struct {
	config, run, script, bin, markdown string
	hosts                              string // hosts.json of make up HOSTS=1: the network faults' map
	clients                            int
	duration, gap, drain, hold         time.Duration
	seed                               uint64
	verifyEvery                        time.Duration
	faults                             []string      // the kinds to inject (nil: every kind)
	everyKind                          bool          // go on past duration until each kind was drawn
	longest                            time.Duration // with everyKind, the load's cap (0: 3 times duration)
}

func main() {
	var o options
	flag.StringVar(&o.config, "config", "configs/dev.yaml", "the dev cluster's configuration")
	flag.StringVar(&o.run, "run", envOr("HB_DEV_RUN", ".run"), "the dev cluster's pid files (scripts/dev.sh's .run, or HB_DEV_RUN)")
	flag.StringVar(&o.script, "dev", "scripts/dev.sh", "scripts/dev.sh, to start MariaDB and memcached again")
	flag.StringVar(&o.bin, "bin", "", "directory of hbctl and hbarchive (default: RUN/bin)")
	flag.IntVar(&o.clients, "clients", 2000, "concurrent clients (each its own user)")
	flag.DurationVar(&o.duration, "duration", 3*time.Minute, "how long the clients and the faults run")
	flag.DurationVar(&o.gap, "gap", 8*time.Second, "mean time between one fault's recovery and the next fault")
	flag.DurationVar(&o.hold, "hold", 5*time.Second, "mean time a partition, isolation or power loss lasts before its heal (0.6 to 1.6 times it)")
	flag.DurationVar(&o.drain, "drain", 3*time.Minute, "longest wait after the run for expiries and the outboxes")
	flag.DurationVar(&o.verifyEvery, "verify-every", 30*time.Second, "run hbctl verify this often during the run (0: never)")
	flag.Uint64Var(&o.seed, "seed", uint64(time.Now().UnixNano()), "seed of the clients and the fault schedule")
	flag.StringVar(&o.hosts, "hosts", "", "hosts.json of a cluster on hosts (make up HOSTS=1): enables the network faults (partitions, isolation, power loss)")
	flag.BoolVar(&o.everyKind, "every-kind", true, "go on past -duration (up to -longest) until every kind of fault was drawn once")
	flag.DurationVar(&o.longest, "longest", 0, "with -every-kind, the longest the load goes on (default: 3 times -duration)")
	flag.StringVar(&o.markdown, "markdown", "", "also write the report as Markdown into this file (RELIABILITY.md)")
	only := flag.String("faults", "", "the kinds of fault to inject, comma-separated (default: every kind: "+strings.Join(kinds, ", ")+")")
	flag.Parse()
	if o.longest != 0 && o.longest < o.duration {
		fmt.Fprintf(os.Stderr, "hbchaos: flag -longest: %v is shorter than -duration (%v)\n", o.longest, o.duration)
		os.Exit(2)
	}
	if *only != "" {
		for _, k := range strings.Split(*only, ",") {
			if k = strings.TrimSpace(k); !slices.Contains(kinds, k) {
				fmt.Fprintf(os.Stderr, "hbchaos: flag -faults: no fault kind %q (kinds: %s)\n", k, strings.Join(kinds, ", "))
				os.Exit(2)
			}
			o.faults = append(o.faults, k)
		}
	}
	if o.bin == "" {
		o.bin = filepath.Join(o.run, "bin")
	}
	ok, err := run(context.Background(), o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hbchaos:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// result is one run: its load, faults, verify runs and findings.
type result struct {
	o              options
	began, loadEnd time.Time
	faults         []fault
	verifies       []verifyRun   // each verify during the run
	ackedEnd       int64         // answers acknowledged when the load ended
	loadFor        time.Duration // how long the load ran (-duration, or more with -every-kind)
	left           int           // operations with no final answer even after the faults
	outboxLeft     int
	f              findings
	l              *load
}

// run is the whole chaos run; it reports whether nothing was lost or doubled.
func run(ctx context.Context, o options, w io.Writer) (bool, error) {
	cfg, err := configs.Load(o.config, os.Environ())
	if err != nil {
		return false, err
	}
	var sets []configs.Set
	for _, s := range cfg.Sets {
		if len(s.Servers) > 0 {
			sets = append(sets, s)
		}
	}
	hbctl := filepath.Join(o.bin, "hbctl")
	d := &dev{cfg: cfg, config: o.config, run: o.run, script: o.script, bin: o.bin, sets: sets,
		replica: namesReplicas(o.config, hbctl), rng: rand.New(rand.NewPCG(o.seed, 1)), holdFor: o.hold, notes: w}
	if o.hosts != "" {
		if d.hosts, err = devhosts.Read(o.hosts); err != nil {
			return false, err
		}
	}
	l := &load{
		base:   "http://" + cfg.Router.Listen,
		signer: hongbao.NewSigner([]byte(cfg.Secret)),
		hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			MaxIdleConns: o.clients, MaxIdleConnsPerHost: o.clients, IdleConnTimeout: 30 * time.Second}},
		users:  hongbao.UserID(time.Now().Unix()%100_000_000) << 21,
		maxCnt: min(cfg.Limits.MaxCount, 2000),
	}
	if cfg.Limits.MaxShare > 0 && cfg.Limits.MaxShare < 50 || cfg.Limits.MaxTotal < int64(l.maxCnt)*50 {
		l.maxCnt = 100 // the limits allow no activity packet
	}
	d.l = l
	r := &result{o: o, began: time.Now(), l: l}
	// Every server and the router ready first: a fault must not be
	// blamed for a server that never came up (make up's waits do not
	// stop scripts/dev.sh chaos).
	if err := d.ready(ctx); err != nil {
		return false, err
	}
	// And, when a kind fails a SET over or kills a MariaDB, the first
	// creation of the day tables over: a failover among its CREATE TABLEs
	// rebuilds the old primary (minutes) instead of rejoining it, a case
	// the replica link cut's kind covers; a MariaDB killed among them may
	// not start again (killsMariaDB).
	if slices.ContainsFunc(faultKinds(o), func(k string) bool { return failsOver(k) || killsMariaDB(k) }) &&
		!devrun.WaitEnsure(ctx, d.run, 10*time.Minute, func() {
			fmt.Fprintln(w, "hbchaos: waiting for the day tables' creation (hbctl schema ensure) to end...")
		}) {
		fmt.Fprintln(w, "hbchaos: the day tables' creation still runs after 10 minutes: faults begin anyway")
	}
	fmt.Fprintf(w, "hbchaos: %d clients for %v against %s (seed %d); faults every ~%v\n", o.clients, o.duration, l.base, o.seed, o.gap)

	loadCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for i := range o.clients {
		wg.Go(func() { l.client(loadCtx, l.users+hongbao.UserID(i+1), o.seed) })
	}
	var mu sync.Mutex
	if o.verifyEvery > 0 {
		wg.Go(func() {
			for {
				select {
				case <-loadCtx.Done():
					return
				case <-time.After(o.verifyEvery):
				}
				out, err := exec.CommandContext(ctx, hbctl, "verify", "-config", o.config).CombinedOutput()
				v := "ok"
				switch {
				case err != nil && containsViolation(out):
					v = "violation"
					fmt.Fprintf(w, "verify during the run: VIOLATION\n%s\n", out)
				case err != nil:
					v = "error"
				}
				mu.Lock()
				r.verifies = append(r.verifies, verifyRun{at: time.Now(), result: v})
				mu.Unlock()
			}
		})
	}
	// The faults, one at a time, each kind in turn in a shuffled order;
	// with -every-kind the load goes on past -duration (up to -longest)
	// until every kind was drawn once, so that each has its table.
	longest := o.longest
	if longest <= 0 {
		longest = 3 * o.duration
	}
	deck, drawn := []string{}, 0
	began := time.Now()
	for {
		over := time.Since(began) >= o.duration
		if over && (!o.everyKind || drawn >= len(faultKinds(o)) || time.Since(began) >= longest) {
			break
		}
		time.Sleep(time.Duration(float64(o.gap) * (0.5 + d.rng.Float64())))
		if len(deck) == 0 {
			deck = append(deck, faultKinds(o)...)
			d.rng.Shuffle(len(deck), func(i, j int) { deck[i], deck[j] = deck[j], deck[i] })
		}
		kind := deck[0]
		deck = deck[1:]
		drawn++
		if kind == killArchiver {
			// Its recovery is a whole ensure over every day table (a minute
			// or more): measured beside the other faults, not before them.
			wg.Go(func() { r.record(w, &mu, d.inject(ctx, kind)) })
			continue
		}
		acked := l.acked.Load()
		f := d.inject(ctx, kind)
		f.acked0 = acked
		r.record(w, &mu, f)
	}
	stop()
	r.loadFor = time.Since(began).Round(time.Second)
	r.ackedEnd = l.acked.Load()
	wg.Wait()
	r.loadEnd = time.Now()

	fmt.Fprintf(w, "load over: %d sends acknowledged, %d opens; asking %d unanswered operations again\n", l.sends.Load(), l.opens.Load(), l.unanswered.Load())
	r.left = l.resolve(ctx)

	// Every packet expires, the settlers refund and deliver everything.
	dsns := make([]string, len(sets))
	for i, s := range sets {
		dsns[i] = s.MySQLDSN
	}
	fmt.Fprintf(w, "waiting for every packet to expire (%v) and the outboxes to drain...\n", time.Duration(cfg.Limits.Expiry))
	if r.outboxLeft, err = drain(ctx, dsns, time.Now().Add(time.Duration(cfg.Limits.Expiry)+3*time.Second), o.drain); err != nil {
		return false, err
	}
	if r.f, err = check(ctx, l, cfg.WalletDSN, hbctl, o.config); err != nil {
		return false, err
	}
	r.f.outboxLeft = r.outboxLeft
	report(w, r)
	if o.markdown != "" {
		if err := writeMarkdown(o.markdown, r); err != nil {
			return false, err
		}
	}
	ok := r.f.lost == 0 && r.f.doubled == 0 && r.f.sums == 0 && r.f.credits == 0 && r.f.debits == 0 && r.f.verifyOK && r.left == 0
	if n := r.unrecovered(); n > 0 {
		// A fault the system did not come back from within its time is
		// a failure of the run too, whatever the money says.
		fmt.Fprintf(w, "FAILED: %d fault(s) NOT RECOVERED (above)\n", n)
		ok = false
	}
	return ok, nil
}

// faultKinds are the kinds the run draws from: -faults, or every kind.
func faultKinds(o options) []string {
	if len(o.faults) > 0 {
		return o.faults
	}
	return kinds
}

// unrecovered counts the faults injected that the system did not recover
// from.
func (r *result) unrecovered() int {
	n := 0
	for _, f := range r.faults {
		if f.skipped == "" && f.err != nil {
			n++
		}
	}
	return n
}

// record keeps a fault's outcome and prints it.
func (r *result) record(w io.Writer, mu *sync.Mutex, f fault) {
	mu.Lock()
	defer mu.Unlock()
	r.faults = append(r.faults, f)
	switch {
	case f.skipped != "":
		fmt.Fprintf(w, "%s  %-28s skipped: %s\n", f.at.Format("15:04:05"), f.kind, f.skipped)
	case f.err != nil:
		fmt.Fprintf(w, "%s  %-28s %-22s NOT RECOVERED: %v\n", f.at.Format("15:04:05"), f.kind, f.target, f.err)
	default:
		fmt.Fprintf(w, "%s  %-28s %-22s serving again after %.2f s\n", f.at.Format("15:04:05"), f.kind, f.target, f.recovery.Seconds())
	}
}

func containsViolation(out []byte) bool { return strings.Contains(string(out), "VIOLATION") }
