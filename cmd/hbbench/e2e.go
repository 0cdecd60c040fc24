package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/devrun"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// e2eRow is one kind of run of the end-to-end table.
type e2eRow struct {
	name string
	url  func() string
	// procs are the processes the run's CPU is charged to.
	procs []proc
	open  bool // the hot open: answers checked, outbox measured
}

// e2eRun is one wrk run of one row.
type e2eRun struct {
	row     *e2eRow
	conns   int
	w       *wrkResult
	cpu     cpuSample
	wall    time.Duration
	backlog int           // outbox rows when the load stopped
	drain   time.Duration // until the outbox was empty
	check   string        // the answers check of an open run
	commits int64         // of an open run: COMMITs on the hot packet's SET primary during it
}

// opensPerCommit is the opened answers of an open run per COMMIT on the
// hot SET's primary (its open transactions, and its settler's deletes
// every deliver_every): what a commit's fixed cost is spread over.
func (r *e2eRun) opensPerCommit() string {
	if r.commits <= 0 {
		return ""
	}
	return fmt.Sprintf("%.1f", float64(r.w.opened)/float64(r.commits))
}

// perCore is requests per CPU-second of the row's processes.
func (r *e2eRun) perCore() float64 {
	if c := r.cpu.total().Seconds(); c > 0 {
		return float64(r.w.requests) / c
	}
	return 0
}

// e2e is the end-to-end bench's state: the cluster's processes, the hot
// packet and where its rows live.
type e2e struct {
	o      options
	env    *benchEnv
	signer *hongbao.Signer
	router string
	hot    hongbao.PacketID
	total  int64
	count  int
	setDB  *sql.DB // the hot packet's SET
	wallet *wallet.Wallet
	tokens string // directory of token files
	sys    []proc // every process of the cluster
}

// endToEnd measures the system through its router with wrk against the
// bare one-hop and two-hop HTTP ceilings, alternating, with each process's
// CPU read from /proc; see docs/bench/results-e2e.md.
func endToEnd(ctx context.Context, o options, env *benchEnv, w io.Writer) error {
	if _, err := exec.LookPath("wrk"); err != nil {
		return errors.New("wrk is not installed (apt-get install wrk; scripts/dev.sh bench does)")
	}
	sys, err := systemProcs(o.pids)
	if err != nil {
		return err
	}
	x := &e2e{o: o, env: env, signer: hongbao.NewSigner([]byte(env.cfg.Secret)), router: strings.TrimRight(o.e2e, "/"),
		total: 1_000_000_000, count: 1_000_000, sys: sys}
	if x.tokens, err = os.MkdirTemp("", "hbbench-tokens"); err != nil {
		return err
	}
	defer os.RemoveAll(x.tokens)
	if x.wallet, err = wallet.Open(ctx, env.cfg.WalletDSN, env.cfg.CoreMembers(), 2, time.Now); err != nil {
		return err
	}
	defer x.wallet.Close()
	if err := x.sendHot(ctx); err != nil {
		return fmt.Errorf("e2e hot packet (start the cluster with activity limits: make bench-e2e does): %w", err)
	}
	defer x.setDB.Close()
	ceil, err := startCeilings(ctx, o.ceilProf)
	if err != nil {
		return err
	}
	defer ceil.stop()
	one := &e2eRow{name: "one hop: bare Go backend", url: func() string { return "http://" + ceilingBackendAddr + "/" },
		procs: []proc{{"backend", ceil.backend.Process.Pid}}}
	two := &e2eRow{name: "two hops: bare Go proxy -> backend", url: func() string { return "http://" + ceilingProxyAddr + "/" },
		procs: []proc{{"proxy", ceil.proxy.Process.Pid}, {"backend", ceil.backend.Process.Pid}}}
	ping := &e2eRow{name: "hongbao POST /v1/ping", url: func() string { return x.router + "/v1/ping" }, procs: sys}
	open := &e2eRow{name: "hongbao hot open", url: func() string { return x.router + "/v1/packets/" + x.hot.String() + "/open" },
		procs: sys, open: true}
	rows := []*e2eRow{one, two, ping, open}

	admins, err := parseAdmins(o.profileAdmins)
	if err != nil {
		return fmt.Errorf("flag -profile-admins: %w", err)
	}
	conns, err := ints(o.wrkConns)
	if err != nil {
		return fmt.Errorf("flag -wrk-conns: %w", err)
	}
	devrun.WaitEnsure(context.Background(), o.pids, 5*time.Minute, func() {
		fmt.Println("e2e: waiting for the day tables' creation (hbctl schema ensure) to end...")
	})
	fmt.Println("e2e: warm-up...")
	for _, r := range []*e2eRow{two, ping, open} {
		if _, err := x.run(ctx, r, conns[0], 2*time.Second); err != nil {
			return err
		}
	}
	var runs []*e2eRun
	var perfs []*perfProfile
	for _, c := range conns {
		for round := range o.rounds {
			for _, r := range rows {
				fmt.Printf("e2e: %s, %d connections, round %d...\n", r.name, c, round+1)
				wait, perf := func() {}, func() *perfProfile { return nil }
				if round == 0 && (r == ping || r == open) {
					wait = rowProfiles(ctx, admins, o.profileDir, map[*e2eRow]string{ping: "ping", open: "open"}[r], c, o.e2eDur)
				}
				if round == 0 && r == open {
					perf = rowPerf(ctx, mariadbs(sys), o.profileDir, "open", c, o.e2eDur)
				}
				run, err := x.run(ctx, r, c, o.e2eDur)
				wait()
				if p := perf(); p != nil && err == nil {
					p.rate = run.w.rate()
					perfs = append(perfs, p)
				}
				if err != nil {
					return err
				}
				runs = append(runs, run)
			}
		}
	}
	x.report(w, rows, conns, runs)
	for _, p := range perfs {
		writePerf(w, p)
	}
	if o.rainUsers > 0 {
		return x.rain(ctx, w, conns, two, o.rainShares, o.rainUsers)
	}
	return nil
}

// sendHot sends the 1,000,000-share packet every open run opens, through
// the router, and finds its SET's database.
func (x *e2e) sendHot(ctx context.Context) (err error) {
	x.hot, x.setDB, err = x.send(ctx, x.total, x.count)
	return err
}

// send sends a packet of count shares and total fen through the router
// and finds its SET's database (the caller closes it).
func (x *e2e) send(ctx context.Context, total int64, count int) (hongbao.PacketID, *sql.DB, error) {
	sender := hongbao.UserID(7_000_000_001)
	if _, _, err := x.wallet.Apply(ctx, hongbao.Entry{Key: fmt.Sprintf("topup:bench:%d", time.Now().UnixNano()), User: sender,
		Amount: total, Kind: hongbao.KindTopUp}); err != nil {
		return 0, nil, err
	}
	body := fmt.Sprintf(`{"total":%d,"count":%d,"type":"random"}`, total, count)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.router+"/v1/packets", bytes.NewBufferString(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+x.signer.Sign(sender, time.Now().Add(time.Hour)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return 0, nil, fmt.Errorf("send: HTTP %d: %s", resp.StatusCode, raw)
	}
	var p struct{ ID string }
	if err := json.Unmarshal(raw, &p); err != nil {
		return 0, nil, err
	}
	id, err := hongbao.ParsePacketID(p.ID)
	if err != nil {
		return 0, nil, err
	}
	for _, s := range x.env.cfg.Sets {
		db, err := sqldb.Open(s.MySQLDSN, 2)
		if err != nil {
			return 0, nil, err
		}
		if _, _, err := x.remainingOf(ctx, db, id); err == nil {
			return id, db, nil
		}
		db.Close()
	}
	return 0, nil, fmt.Errorf("packet %s is in no SET's database", id)
}

// remaining reads the hot packet's remaining shares and money from db.
func (x *e2e) remaining(ctx context.Context, db *sql.DB) (int64, int64, error) {
	return x.remainingOf(ctx, db, x.hot)
}

// remainingOf reads packet id's remaining shares and money from db.
func (x *e2e) remainingOf(ctx context.Context, db *sql.DB, id hongbao.PacketID) (int64, int64, error) {
	var n, amount int64
	err := db.QueryRowContext(ctx, "SELECT remaining_count, remaining_amount FROM "+id.Table(x.env.loc).Packets()+" WHERE id = ?", id).
		Scan(&n, &amount)
	return n, amount, err
}

// tokenFile writes n tokens of fresh users, one a line.
func (x *e2e) tokenFile(n int) (string, error) {
	path := filepath.Join(x.tokens, strconv.FormatInt(time.Now().UnixNano(), 10))
	var b strings.Builder
	exp := time.Now().Add(time.Hour)
	for range n {
		b.WriteString(x.signer.Sign(x.env.nextUser(), exp))
		b.WriteByte('\n')
	}
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// run runs row r once with wrk for d and measures it.
func (x *e2e) run(ctx context.Context, r *e2eRow, conns int, d time.Duration) (*e2eRun, error) {
	tokens, err := x.tokenFile(int(d.Seconds()+1) * x.o.maxRate)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tokens)
	var n0, commits0 int64
	if r.open {
		if n0, _, err = x.remaining(ctx, x.setDB); err != nil {
			return nil, err
		}
		commits0 = commits(ctx, x.setDB)
	}
	c0, t0 := sample(r.procs), time.Now()
	w, err := runWrk(ctx, r.url(), tokens, 2, conns, d)
	if err != nil {
		return nil, err
	}
	run := &e2eRun{row: r, conns: conns, w: w, wall: time.Since(t0), cpu: sample(r.procs).since(c0)}
	if !r.open {
		return run, nil
	}
	run.commits = commits(ctx, x.setDB) - commits0
	run.backlog = dbtestCount(ctx, x.setDB, "SELECT COALESCE(SUM(n), 0) FROM hb_set.outbox")
	t1 := time.Now()
	for dbtestCount(ctx, x.setDB, "SELECT COUNT(*) FROM hb_set.outbox") > 0 && time.Since(t1) < 5*time.Minute {
		time.Sleep(20 * time.Millisecond)
	}
	run.drain = time.Since(t1)
	run.check = x.check(ctx, w, conns, n0)
	return run, nil
}

// check compares an open run's answers with the packet: the remaining
// count fell by the opened answers (and the requests in flight when wrk
// stopped), every answer was opened, and once the outbox drained the
// ledger holds one credit per share, adding up to what left the packet.
func (x *e2e) check(ctx context.Context, w *wrkResult, conns int, n0 int64) string {
	n1, a1, err := x.remaining(ctx, x.setDB)
	if err != nil {
		return "read failed: " + err.Error()
	}
	var bad []string
	// wrk stops counting at the deadline with up to conns requests in
	// flight, which the system still completes: those shares exist but
	// their answers were not read.
	inFlight := n0 - n1 - w.opened
	if inFlight < 0 || inFlight > int64(conns) {
		bad = append(bad, fmt.Sprintf("remaining fell by %d, %d opened answers (more than %d in flight at the stop)", n0-n1, w.opened, conns))
	}
	if w.already+w.other+w.busy+w.okother > 0 {
		bad = append(bad, fmt.Sprintf("%d already, %d busy, %d other answers", w.already, w.busy, w.other+w.okother))
	}
	var credits, sum int64
	err = x.wallet.DB().QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(amount),0) FROM ledger WHERE entry_key LIKE ?",
		"open:"+x.hot.String()+":%").Scan(&credits, &sum)
	switch {
	case err != nil:
		bad = append(bad, "ledger: "+err.Error())
	case credits != int64(x.count)-n1 || sum != x.total-a1:
		bad = append(bad, fmt.Sprintf("ledger %d credits of %d fen, packet %d shares of %d fen", credits, sum, int64(x.count)-n1, x.total-a1))
	}
	if len(bad) > 0 {
		return "WRONG: " + strings.Join(bad, "; ")
	}
	return fmt.Sprintf("held (%d in flight at the stop; ledger = shares)", inFlight)
}

func dbtestCount(ctx context.Context, db *sql.DB, q string) int {
	var n int
	if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return -1
	}
	return n
}

// report writes the table: for each connection count and row its runs
// pooled (pool), with the ratios to the two-hop ceiling of the same
// connection count, then every run.
func (x *e2e) report(w io.Writer, rows []*e2eRow, conns []int, runs []*e2eRun) {
	fmt.Fprintf(w, "\n## end to end through the router: wrk (2 threads, Lua with pre-signed tokens, a new user per request), %s runs, %d rounds alternating, pooled\n\n",
		x.o.e2eDur, x.o.rounds)
	fmt.Fprintf(w, "CPU: user + system time of the row's own processes from /proc/<pid>/stat during the run (not wrk's). "+
		"hongbao's processes, every one of the cluster's: %s.\n", procKinds(x.sys))
	fmt.Fprintln(w, "\n| connections | run | req/s | p50 | p99 | CPU cores used | req per core-second | per core-second vs two hops | req/s vs two hops | outbox at end (worst round) | drained in (worst round) | answers |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	var targets []string
	for _, c := range conns {
		med := map[*e2eRow]*e2eRun{}
		for _, r := range rows {
			var rs []*e2eRun
			for _, run := range runs {
				if run.row == r && run.conns == c {
					rs = append(rs, run)
				}
			}
			med[r] = pool(rs)
		}
		ceil := med[rows[1]]
		p, o := med[rows[2]], med[rows[3]]
		targets = append(targets, fmt.Sprintf("targets at %d connections: ping %.2fx of the two-hop ceiling per core-second (target 0.9x); hot open %.2fx (target 0.6x); "+
			"outbox at the end %.2f s of opens (target < 1 s), drained in %.2f s (target <= 2 s)",
			c, p.perCore()/ceil.perCore(), o.perCore()/ceil.perCore(), float64(o.backlog)/o.w.rate(), o.drain.Seconds()))
		for _, r := range rows {
			m := med[r]
			outbox, drain, answers := "", "", ""
			if r.open {
				outbox = fmt.Sprintf("%d (%.2f s of opens)", m.backlog, float64(m.backlog)/m.w.rate())
				drain = fmt.Sprintf("%.2f s", m.drain.Seconds())
				answers = fmt.Sprintf("%d opened; %s", m.w.opened, m.check)
			} else if m.w.other+m.w.busy+m.w.sockerr > 0 {
				answers = fmt.Sprintf("%d non-200, %d socket errors", m.w.other+m.w.busy, m.w.sockerr)
			}
			fmt.Fprintf(w, "| %d | %s | %.0f | %s | %s | %.2f | %.0f | %.2fx | %.2fx | %s | %s | %s |\n", c, r.name, m.w.rate(),
				ms(m.w.p50), ms(m.w.p99), m.cpu.total().Seconds()/m.wall.Seconds(), m.perCore(),
				m.perCore()/ceil.perCore(), m.w.rate()/ceil.w.rate(), outbox, drain, answers)
		}
	}
	fmt.Fprintf(w, "\n%s\n", strings.Join(targets, "\n\n"))
	fmt.Fprintln(w, "\nEvery run (CPU split: share of one core per kind of process):")
	fmt.Fprintln(w, "\n| connections | run | req/s | req per core-second | CPU split | opens per commit on the hot SET's primary | outbox at end | drained in | answers |\n|---|---|---|---|---|---|---|---|---|")
	for _, run := range runs {
		outbox, drain := "", ""
		if run.row.open {
			outbox, drain = strconv.Itoa(run.backlog), fmt.Sprintf("%.2f s", run.drain.Seconds())
		}
		fmt.Fprintf(w, "| %d | %s | %.0f | %.0f | %s | %s | %s | %s | %s |\n", run.conns, run.row.name, run.w.rate(), run.perCore(),
			run.cpu.split(run.wall), run.opensPerCommit(), outbox, drain, run.check)
	}
}

// pool sums the requests, CPU and time of rs, so the rates are over all
// of its rounds; latencies are the rounds' means; the outbox figures the
// worst round's (the targets bound them).
func pool(rs []*e2eRun) *e2eRun {
	p := &e2eRun{row: rs[0].row, conns: rs[0].conns, w: &wrkResult{}, cpu: cpuSample{}, check: "held"}
	for _, r := range rs {
		p.w.requests += r.w.requests
		p.w.opened += r.w.opened
		p.w.busy += r.w.busy
		p.w.other += r.w.other
		p.w.sockerr += r.w.sockerr
		p.w.took += r.w.took
		p.w.p50 += r.w.p50 / time.Duration(len(rs))
		p.w.p99 += r.w.p99 / time.Duration(len(rs))
		p.wall += r.wall
		for k, v := range r.cpu {
			p.cpu[k] += v
		}
		p.backlog = max(p.backlog, r.backlog)
		p.drain = max(p.drain, r.drain)
		if !strings.HasPrefix(r.check, "held") {
			p.check = r.check
		}
	}
	return p
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range split(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("empty")
	}
	return out, nil
}

// procKinds names the processes counted, by kind: "1 router, 6 server, ...".
func procKinds(ps []proc) string {
	var kinds []string
	n := map[string]int{}
	for _, p := range ps {
		k, _, _ := strings.Cut(p.name, "-")
		if n[k] == 0 {
			kinds = append(kinds, k)
		}
		n[k]++
	}
	var out []string
	for _, k := range kinds {
		out = append(out, fmt.Sprintf("%d %s", n[k], k))
	}
	return strings.Join(out, ", ")
}
