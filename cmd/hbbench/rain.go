package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// rainScript is the Lua of a rain: thread t of n takes the lines t, t+n,
// ... of the token file and sends each once (a user tries once); delay()
// reserves a token for a connection's next request and parks the
// connection once the thread's tokens are spent, so no request is sent
// twice and none is made up. A thread whose every request was
// answered prints HBDONE; wrk itself only stops at its duration's end or
// on SIGINT, which runRainWrk sends once every thread is done. Every
// answer is counted by what it says.
const rainScript = `
local threads = {}
local nthreads = %d
local tokenFile = %q
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function init(args)
  tokens = {}
  local n = 0
  for line in io.lines(tokenFile) do
    if n %% nthreads == tid then tokens[#tokens + 1] = "Bearer " .. line end
    n = n + 1
  end
  reserved, sent, answered = 0, 0, 0
  opened, already, okother, soldout, busy, other = 0, 0, 0, 0, 0, 0
end
-- delay() runs before each request() of a connection: several can pass
-- before their request() runs, so a token is reserved here.
function delay()
  if reserved >= #tokens then return 3600000 end
  reserved = reserved + 1
  return 0
end
-- request() takes the token delay() reserved. wrk also calls it once
-- where no request follows (before the first delay()): that call takes
-- nothing. A request() without a reservation that is sent after all (a
-- reconnect's) repeats a token: counted, and the rain's check fails.
function request()
  if sent < reserved then sent = sent + 1 end
  return wrk.format("POST", nil, {["Authorization"] = tokens[math.max(sent, 1)]}, nil)
end
function response(status, headers, body)
  answered = answered + 1
  if status == 200 then
    if string.find(body, '"status":"opened"', 1, true) then opened = opened + 1
    elseif string.find(body, '"status":"already_opened"', 1, true) then already = already + 1
    else okother = okother + 1 end
  elseif status == 409 and string.find(body, '"code":"sold_out"', 1, true) then soldout = soldout + 1
  elseif status == 503 then busy = busy + 1
  else other = other + 1 end
  if answered == #tokens then
    io.stdout:write("HBDONE\n")
    io.stdout:flush()
  end
end
function done(summary, latency, requests)
  local c = {opened = 0, already = 0, okother = 0, soldout = 0, busy = 0, other = 0}
  for _, t in ipairs(threads) do
    for k, _ in pairs(c) do c[k] = c[k] + t:get(k) end
  end
  local e = summary.errors
  io.write(string.format("HB requests=%%d duration_us=%%d p50_us=%%d p99_us=%%d opened=%%d already=%%d okother=%%d soldout=%%d busy=%%d other=%%d sockerr=%%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    c.opened, c.already, c.okother, c.soldout, c.busy, c.other, e.connect + e.read + e.write + e.timeout))
end
`

// rainRun is one rain: through the router, the bare two-hop ceiling, or
// in process.
type rainRun struct {
	conns   int
	how     string
	soldOut time.Duration // until the packet's last share was taken (0: not measured)
	took    time.Duration // until the last answer
	answers int64
	p50     time.Duration
	p99     time.Duration
	cpu     cpuSample // of the row's processes, when measured
	check   string
}

// rainRouter rains on a fresh packet of shares shares through the router:
// users fresh users each try once. Every answer is checked: exactly shares
// opened, the rest sold_out, nothing else; the packet empty in MySQL; once
// the outbox drained, the ledger holds one credit per share adding up to
// the packet's total.
func (x *e2e) rainRouter(ctx context.Context, conns, shares, users int) (*rainRun, error) {
	total := int64(shares) * 100
	id, db, err := x.send(ctx, total, shares)
	if err != nil {
		return nil, fmt.Errorf("rain packet: %w", err)
	}
	defer db.Close()
	tokens, err := x.tokenFile(users)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tokens)
	// The time until the last share is taken: MySQL's remaining count,
	// polled by a goroutine this function owns and waits for.
	pollCtx, stopPoll := context.WithCancel(ctx)
	var soldOut time.Duration
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for pollCtx.Err() == nil {
			if n, _, err := x.remainingOf(pollCtx, db, id); err == nil && n == 0 {
				soldOut = time.Since(t0)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	c0 := sample(x.sys)
	w, err := runRainWrk(ctx, x.router+"/v1/packets/"+id.String()+"/open", tokens, 2, conns)
	cpu := sample(x.sys).since(c0)
	if err == nil && soldOut == 0 {
		time.Sleep(50 * time.Millisecond) // the poll's last round
	}
	stopPoll()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	run := &rainRun{conns: conns, how: "hongbao through the router", soldOut: soldOut, took: w.took, answers: w.requests,
		p50: w.p50, p99: w.p99, cpu: cpu}
	var bad []string
	if w.opened != int64(shares) || w.soldout != int64(users-shares) || w.already+w.okother+w.busy+w.other+w.sockerr > 0 {
		bad = append(bad, fmt.Sprintf("%d opened, %d sold_out (want %d and %d); %d already, %d busy, %d other, %d socket errors",
			w.opened, w.soldout, shares, users-shares, w.already, w.busy, w.other+w.okother, w.sockerr))
	}
	if n, a, err := x.remainingOf(ctx, db, id); err != nil || n != 0 || a != 0 {
		bad = append(bad, fmt.Sprintf("packet after the rain: %d shares, %d fen left (%v)", n, a, err))
	}
	for t1 := time.Now(); dbtestCount(ctx, db, "SELECT COUNT(*) FROM hb_set.outbox") > 0 && time.Since(t1) < 2*time.Minute; {
		time.Sleep(20 * time.Millisecond)
	}
	var credits, sum int64
	if err := x.wallet.DB().QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(amount),0) FROM ledger WHERE entry_key LIKE ?",
		"open:"+id.String()+":%").Scan(&credits, &sum); err != nil || credits != int64(shares) || sum != total {
		bad = append(bad, fmt.Sprintf("ledger %d credits of %d fen, want %d of %d (%v)", credits, sum, shares, total, err))
	}
	run.check = fmt.Sprintf("held: %d opened, %d sold_out, ledger = shares", w.opened, w.soldout)
	if len(bad) > 0 {
		run.check = "WRONG: " + fmt.Sprint(bad)
	}
	return run, nil
}

// rainCeiling sends the same rain (users requests, each once) through the
// bare two-hop ceiling.
func (x *e2e) rainCeiling(ctx context.Context, conns, users int, url string, procs []proc) (*rainRun, error) {
	tokens, err := x.tokenFile(users)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tokens)
	c0 := sample(procs)
	w, err := runRainWrk(ctx, url, tokens, 2, conns)
	if err != nil {
		return nil, err
	}
	run := &rainRun{conns: conns, how: "two hops: bare Go proxy -> backend", took: w.took, answers: w.requests, p50: w.p50, p99: w.p99,
		cpu: sample(procs).since(c0), check: fmt.Sprintf("%d answers", w.okother)}
	if w.okother != int64(users) || w.sockerr+w.other+w.busy > 0 {
		run.check = fmt.Sprintf("WRONG: %d of %d answered 200, %d errors", w.okother, users, w.sockerr+w.other+w.busy)
	}
	return run, nil
}

// rainInProcess is the in-process design comparison's rain (20,000 shares,
// 100,000 users) on the product's open path, conns clients.
func (x *e2e) rainInProcess(ctx context.Context, conns int) (*rainRun, error) {
	r, err := x.env.runOne(ctx, x.o, scenarios["rain"], "queue", conns)
	if err != nil {
		return nil, err
	}
	return &rainRun{conns: conns, how: "hongbao in process (set.Server.Open, no HTTP)", took: r.took, answers: int64(r.answers),
		p50: r.pct(0.5), p99: r.pct(0.99), check: fmt.Sprintf("%s: %d opened of %d answers", r.invariants, r.opened, r.answers)}, nil
}

// runRainWrk runs the rain script: every token once, until every answer.
// The time until the last answer is measured here, from wrk's start to
// the last thread's HBDONE (wrk's own duration runs to the SIGINT).
func runRainWrk(ctx context.Context, url, tokens string, threads, conns int) (*wrkResult, error) {
	f, err := os.CreateTemp("", "hbbench-rain-*.lua")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := fmt.Fprintf(f, rainScript, threads, tokens); err != nil {
		return nil, err
	}
	f.Close()
	cmd := exec.CommandContext(ctx, "wrk", fmt.Sprintf("-t%d", threads), fmt.Sprintf("-c%d", conns), "-d5m", "--timeout", "10s", "-s", f.Name(), url)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var out strings.Builder
	cmd.Stderr = &out
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var took time.Duration
	done := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		if line == "HBDONE" {
			if done++; done == threads {
				took = time.Since(t0)
				_ = cmd.Process.Signal(os.Interrupt) // wrk prints its summary and exits
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("wrk: %w\n%s", err, out.String())
	}
	w, err := parseWrk(out.String())
	if err != nil {
		return nil, err
	}
	if took == 0 {
		return nil, fmt.Errorf("wrk: the rain did not end in 5 minutes: %d answers\n%s", w.requests, out.String())
	}
	w.took = took
	return w, nil
}

// rain runs the rains for every connection count and writes their table.
func (x *e2e) rain(ctx context.Context, w io.Writer, conns []int, two *e2eRow, shares, users int) error {
	var runs []*rainRun
	for _, c := range conns {
		fmt.Printf("rain: %d shares, %d users, %d connections...\n", shares, users, c)
		r, err := x.rainRouter(ctx, c, shares, users)
		if err != nil {
			return fmt.Errorf("rain through the router: %w", err)
		}
		ceil, err := x.rainCeiling(ctx, c, users, two.url(), two.procs)
		if err != nil {
			return fmt.Errorf("rain through the ceiling: %w", err)
		}
		in, err := x.rainInProcess(ctx, c)
		if err != nil {
			return fmt.Errorf("rain in process: %w", err)
		}
		runs = append(runs, r, ceil, in)
	}
	fmt.Fprintf(w, "\n## the rain end to end: one packet of %d shares, %d users each trying once (wrk, 2 threads, Lua with one pre-signed token per user)\n\n", shares, users)
	fmt.Fprintln(w, "| connections | run | last share taken at | last answer at | answers/s | p50 | p99 | CPU core-seconds | answers |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		sold, cpu := "", ""
		if r.soldOut > 0 {
			sold = fmt.Sprintf("%.2f s", r.soldOut.Seconds())
		}
		if len(r.cpu) > 0 {
			cpu = fmt.Sprintf("%.2f (%s)", r.cpu.total().Seconds(), r.cpu.split(r.took))
		}
		fmt.Fprintf(w, "| %d | %s | %s | %.2f s | %.0f | %s | %s | %s | %s |\n", r.conns, r.how, sold, r.took.Seconds(),
			float64(r.answers)/r.took.Seconds(), ms(r.p50), ms(r.p99), cpu, r.check)
	}
	return nil
}
