package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MariaDB is no Go process: its profile (where each microsecond of an open
// goes in the SET's primary, its replica and the core group's two) comes
// from perf, sampling the mariadbd processes of the row at perfHz.
const perfHz = 997

// The parts a MariaDB sample is counted in. Debian's mariadbd exports few
// of its symbols (InnoDB's are not among them): its own code splits only
// into the parser and lexer, the rest of the SQL layer that has names, and
// what perf could not resolve.
const (
	partKernel     = "kernel"
	partParser     = "parser and lexer"
	partNamed      = "SQL layer (named)"
	partUnresolved = "unresolved (InnoDB, mostly)"
	partLibc       = "libc"
)

var perfParts = []string{partKernel, partParser, partNamed, partUnresolved, partLibc}

// perfPart is the part a sample of symbol sym in dso (perf script's
// fields) is counted in.
func perfPart(sym, dso string) string {
	switch {
	case strings.Contains(dso, "kernel"):
		return partKernel
	case strings.Contains(dso, "libc"):
		return partLibc
	case sym == "[unknown]" || sym == "":
		return partUnresolved
	case strings.HasPrefix(sym, "MYSQLparse") || strings.HasPrefix(sym, "ORAparse") ||
		strings.HasPrefix(sym, "Lex_input_stream::") || strings.Contains(sym, "lex_one_token"):
		return partParser
	}
	return partNamed
}

// mariadbs are the MariaDB processes among procs.
func mariadbs(procs []proc) []proc {
	var out []proc
	for _, p := range procs {
		if strings.HasPrefix(p.name, "mariadb-") {
			out = append(out, p)
		}
	}
	return out
}

// perfProfile is one row run's samples of each process, by part, and the
// run's rate of requests (set once the run is over).
type perfProfile struct {
	row     string
	conns   int
	secs    float64
	samples map[string]map[string]int // process -> part -> samples
	rate    float64
}

// rowPerf samples procs (name and pid; a row's MariaDB processes) with
// perf record for about d, into dir/<row>-<conns>-mariadb.perf.data. The
// returned function waits for it and reads the samples (nil when perf is
// missing or could not record: a message says why, and the run goes on).
func rowPerf(ctx context.Context, procs []proc, dir, row string, conns int, d time.Duration) func() *perfProfile {
	if dir == "" || len(procs) == 0 || d < 2*time.Second {
		return func() *perfProfile { return nil }
	}
	if _, err := exec.LookPath("perf"); err != nil {
		fmt.Fprintln(os.Stderr, "hbbench: no perf (apt-get install linux-perf): MariaDB is not profiled")
		return func() *perfProfile { return nil }
	}
	secs := int((d - time.Second).Seconds())
	pids := make([]string, len(procs))
	names := map[string]string{}
	for i, p := range procs {
		pids[i] = strconv.Itoa(p.pid)
		names[pids[i]] = p.name
	}
	file := filepath.Join(dir, fmt.Sprintf("%s-%d-mariadb.perf.data", row, conns))
	done := make(chan struct{})
	var p *perfProfile
	go func() {
		defer close(done)
		rec := exec.CommandContext(ctx, "perf", "record", "-q", "-F", strconv.Itoa(perfHz), "-p", strings.Join(pids, ","),
			"-o", file, "--", "sleep", strconv.Itoa(secs))
		if out, err := rec.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "hbbench: perf record: %v\n%s", err, out)
			return
		}
		samples, err := perfScript(ctx, file, names)
		if err != nil {
			fmt.Fprintf(os.Stderr, "hbbench: perf script: %v\n", err)
			return
		}
		p = &perfProfile{row: row, conns: conns, secs: float64(secs), samples: samples}
	}()
	return func() *perfProfile { <-done; return p }
}

// perfScript reads a perf.data file's samples by process and part.
func perfScript(ctx context.Context, file string, names map[string]string) (map[string]map[string]int, error) {
	script := exec.CommandContext(ctx, "perf", "script", "-i", file, "-F", "pid,ip,sym,dso")
	stdout, err := script.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := script.Start(); err != nil {
		return nil, err
	}
	samples, rerr := readPerfScript(stdout, names)
	if werr := script.Wait(); rerr == nil {
		rerr = werr
	}
	return samples, rerr
}

// readPerfScript counts perf script's lines ("PID IP SYMBOL (DSO)") by
// process (names: pid -> name; other pids are left out) and part.
func readPerfScript(r io.Reader, names map[string]string) (map[string]map[string]int, error) {
	out := map[string]map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		name, ok := names[f[0]]
		if !ok {
			continue
		}
		sym, dso := f[2:], ""
		if last := f[len(f)-1]; strings.HasPrefix(last, "(") {
			sym, dso = f[2:len(f)-1], last
		}
		if out[name] == nil {
			out[name] = map[string]int{}
		}
		out[name][perfPart(strings.Join(sym, " "), dso)]++
	}
	return out, sc.Err()
}

// writePerf writes p as a table: each process's CPU microseconds per
// request (its samples over perfHz, over the requests of the sampled
// seconds at the run's rate) and its parts.
func writePerf(w io.Writer, p *perfProfile) {
	if p == nil || p.rate <= 0 {
		return
	}
	fmt.Fprintf(w, "\n### MariaDB during the %s row at %d connections (perf record -F %d, %.0f s of its first round)\n\n", p.row, p.conns, perfHz, p.secs)
	fmt.Fprintf(w, "| process | CPU us per request | %s |\n|---|---|%s\n", strings.Join(perfParts, " | "), strings.Repeat("---|", len(perfParts)))
	names := make([]string, 0, len(p.samples))
	for n := range p.samples {
		names = append(names, n)
	}
	slices.Sort(names)
	requests := p.rate * p.secs
	total := 0.0
	for _, n := range names {
		parts := p.samples[n]
		all := 0
		for _, c := range parts {
			all += c
		}
		us := float64(all) / perfHz / requests * 1e6
		total += us
		fmt.Fprintf(w, "| %s | %.0f |", n, us)
		for _, part := range perfParts {
			fmt.Fprintf(w, " %.0f%% |", 100*float64(parts[part])/float64(all))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "| all | %.0f |%s\n", total, strings.Repeat(" |", len(perfParts)))
}
