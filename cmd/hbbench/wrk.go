package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// wrkScript is the Lua every wrk run uses: each request carries the next
// pre-signed token of a file (one line each; thread t of n takes lines t,
// t+n, ...: a new user per request as long as the file lasts), and every
// answer is counted by what it says. done() prints one line, "HB k=v ...",
// which wrkResult parses.
const wrkScript = `
local threads = {}
local nthreads = %d
local tokenFile = %q
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function init(args)
  tokens = {}
  for line in io.lines(tokenFile) do tokens[#tokens + 1] = "Bearer " .. line end
  i = 0
  opened, already, okother, busy, other = 0, 0, 0, 0, 0
end
function request()
  local k = (i * nthreads + tid) %% #tokens + 1
  i = i + 1
  return wrk.format("POST", nil, {["Authorization"] = tokens[k]}, nil)
end
function response(status, headers, body)
  if status == 200 then
    if string.find(body, '"status":"opened"', 1, true) then opened = opened + 1
    elseif string.find(body, '"status":"already_opened"', 1, true) then already = already + 1
    else okother = okother + 1 end
  elseif status == 503 then busy = busy + 1
  else other = other + 1 end
end
function done(summary, latency, requests)
  local c = {opened = 0, already = 0, okother = 0, busy = 0, other = 0}
  for _, t in ipairs(threads) do
    for k, _ in pairs(c) do c[k] = c[k] + t:get(k) end
  end
  local e = summary.errors
  io.write(string.format("HB requests=%%d duration_us=%%d p50_us=%%d p99_us=%%d opened=%%d already=%%d okother=%%d busy=%%d other=%%d sockerr=%%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    c.opened, c.already, c.okother, c.busy, c.other, e.connect + e.read + e.write + e.timeout))
end
`

// wrkResult is what one wrk run reports.
type wrkResult struct {
	requests, opened, already, okother, soldout, busy, other, sockerr int64
	took, p50, p99                                                    time.Duration
}

func (r *wrkResult) rate() float64 { return float64(r.requests) / r.took.Seconds() }

// runWrk runs wrk with threads and conns against url for d, every request
// with a token of tokens (a file of one token a line).
func runWrk(ctx context.Context, url, tokens string, threads, conns int, d time.Duration) (*wrkResult, error) {
	return runWrkScript(ctx, fmt.Sprintf(wrkScript, threads, tokens), url, threads, conns, d)
}

// runWrkScript runs wrk with the Lua script for at most d.
func runWrkScript(ctx context.Context, script, url string, threads, conns int, d time.Duration) (*wrkResult, error) {
	f, err := os.CreateTemp("", "hbbench-*.lua")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := io.WriteString(f, script); err != nil {
		return nil, err
	}
	f.Close()
	args := []string{fmt.Sprintf("-t%d", threads), fmt.Sprintf("-c%d", conns), "-d" + d.String(), "--timeout", "10s", "-s", f.Name(), url}
	out, err := exec.CommandContext(ctx, "wrk", args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("wrk %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return parseWrk(string(out))
}

// parseWrk reads the "HB ..." line of a wrk run.
func parseWrk(out string) (*wrkResult, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "HB ")
		if !ok {
			continue
		}
		v := map[string]int64{}
		for _, kv := range strings.Fields(line) {
			k, s, _ := strings.Cut(kv, "=")
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("wrk: %q: %w", kv, err)
			}
			v[k] = n
		}
		return &wrkResult{requests: v["requests"], opened: v["opened"], already: v["already"], okother: v["okother"], soldout: v["soldout"],
			busy: v["busy"], other: v["other"], sockerr: v["sockerr"], took: time.Duration(v["duration_us"]) * time.Microsecond,
			p50: time.Duration(v["p50_us"]) * time.Microsecond, p99: time.Duration(v["p99_us"]) * time.Microsecond}, nil
	}
	return nil, fmt.Errorf("wrk: no HB line in its output:\n%s", out)
}
