package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// report prints the run's table.
func report(w io.Writer, r *result) {
	fmt.Fprintln(w)
	fmt.Fprint(w, table(r))
	fmt.Fprint(w, kindTables(r))
	if len(r.f.problems) > 0 {
		fmt.Fprintln(w, "\nevidence (first findings):")
		for _, p := range r.f.problems {
			fmt.Fprintln(w, "  "+p)
		}
	}
	fmt.Fprintln(w, "\nhbctl verify after the run:")
	fmt.Fprintln(w, indent(r.f.verify))
}

// table is the run's results as a Markdown table.
func table(r *result) string {
	var b strings.Builder
	l, f := r.l, r.f
	row := func(k, v string, args ...any) { fmt.Fprintf(&b, "| %s | %s |\n", k, fmt.Sprintf(v, args...)) }
	b.WriteString("| | |\n|---|---|\n")
	row("load", "%d clients for %v through the router: %d packets sent (%d activity packets of 200..%d shares), %d opens acknowledged, counting the operations asked again after the faults (the run with its faults' recoveries took %v)",
		r.o.clients, r.loadFor, l.sends.Load(), l.activity.Load(), l.maxCnt, l.opens.Load(), r.loadEnd.Sub(r.began).Round(time.Second))
	row("acknowledged answers", "%d final answers (%d requests asked again after no answer, a 5xx, 429 or 421; %d operations got no final answer within 20 s and were asked again after the faults, %d still unanswered)",
		l.acked.Load(), l.retries.Load(), l.unanswered.Load(), r.left)
	row("answers while faults ran", "%s", statuses(l))
	row("faults", "%s", faultCounts(r.faults))
	row("lost", "**%d** (acknowledged opens missing from the detail or with another amount, acknowledged sends missing)", f.lost)
	row("doubled", "**%d** (a user twice in a detail, a ledger entry twice)", f.doubled)
	row("shares + remaining = total", "%d packets checked, %d shares, %d violations", f.packets, f.shares, f.sums)
	row("openers credited exactly their shares", "%d users wrong", f.credits)
	row("senders debited their packets, refunded the rest", "%d users wrong", f.debits)
	row("shares no client heard of", "%d (opens committed whose every answer was lost: the client gave up)", f.unacked)
	row("open answers that disagree", "%d (one user told two amounts for one packet)", f.conflictingAnswer)
	row("outbox left after the drain", "%d", f.outboxLeft)
	row("sends voided by the sweeper", "%d (a packet left pending, its debit never made: a retry of its send answers 402 insufficient_funds)", f.voids)
	verifies := map[string]int{}
	for _, v := range r.verifies {
		verifies[v.result]++
	}
	ok := "passes"
	if !f.verifyOK {
		ok = "**FAILS**"
	}
	row("hbctl verify", "after the run: %s; during the run: %d passed, %d violations, %d could not run (a database down)",
		ok, verifies["ok"], verifies["violation"], verifies["error"])
	b.WriteString("\n| fault | injected | recovered | serving again after (min / median / max) | its SET's writes unacknowledged for at most |\n|---|---|---|---|---|\n")
	for _, k := range kinds {
		st := statOf(r.faults, k)
		n, bad, skipped, ds := st.n, st.bad, st.skipped, st.ds
		switch {
		case n == 0 && skipped != "":
			fmt.Fprintf(&b, "| %s | skipped | | %s | |\n", k, skipped)
		case n == 0:
			fmt.Fprintf(&b, "| %s | 0 | | | |\n", k)
		case len(ds) == 0:
			fmt.Fprintf(&b, "| %s | %d | 0 | | %s |\n", k, n, st.outage())
		default:
			fmt.Fprintf(&b, "| %s | %d | %d | %.2f / %.2f / %.2f s | %s |\n", k, n, n-bad, ds[0].Seconds(), ds[len(ds)/2].Seconds(), ds[len(ds)-1].Seconds(), st.outage())
		}
	}
	return b.String()
}

// kindStat is one kind's faults: how many were injected, how many did
// not recover, their recoveries (sorted), the targets, and why it was
// skipped when it was.
type kindStat struct {
	n, bad   int
	ds       []time.Duration
	targets  []string
	skipped  string
	outages  int           // how many of them measured their write outage
	outageTo time.Duration // the longest of those
}

// outage is the longest write outage of the kind's faults, "" when none
// was measured.
func (st kindStat) outage() string {
	if st.outages == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f s", st.outageTo.Seconds())
}

// statOf is kind k's kindStat among fs.
func statOf(fs []fault, k string) kindStat {
	var st kindStat
	for _, f := range fs {
		if f.kind != k {
			continue
		}
		if f.skipped != "" {
			st.skipped = f.skipped
			continue
		}
		st.n++
		if f.outage >= 0 {
			st.outages++
			st.outageTo = max(st.outageTo, f.outage)
		}
		if !slices.Contains(st.targets, f.target) {
			st.targets = append(st.targets, f.target)
		}
		if f.err != nil {
			st.bad++
			continue
		}
		st.ds = append(st.ds, f.recovery)
	}
	slices.Sort(st.ds)
	slices.Sort(st.targets)
	return st
}

// statuses lists the answers' statuses, most frequent first.
func statuses(l *load) string {
	type kv struct {
		k string
		n int64
	}
	var all []kv
	l.statuses.Range(func(k, v any) bool {
		all = append(all, kv{k.(string), v.(*atomic.Int64).Load()})
		return true
	})
	slices.SortFunc(all, func(a, b kv) int { return int(b.n - a.n) })
	parts := make([]string, len(all))
	for i, x := range all {
		parts[i] = fmt.Sprintf("%s: %d", strings.TrimSpace(x.k), x.n)
	}
	return strings.Join(parts, ", ")
}

func faultCounts(fs []fault) string {
	n, skipped := 0, 0
	for _, f := range fs {
		if f.skipped != "" {
			skipped++
		} else {
			n++
		}
	}
	return fmt.Sprintf("%d injected (%d skipped), by kind below", n, skipped)
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// writeMarkdown replaces the run's section of path (between the markers)
// with this run, or writes the file.
func writeMarkdown(path string, r *result) error {
	const begin, end = "<!-- hbchaos: begin -->", "<!-- hbchaos: end -->"
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nRun of %s (%d clients, %v, seed %d):\n\n", begin, r.began.UTC().Format("2006-01-02 15:04 MST"), r.o.clients, r.loadFor, r.o.seed)
	b.WriteString(table(r))
	b.WriteString("\nEach kind of fault apart: its windows run from each of its injections to the next fault.\n")
	b.WriteString(kindTables(r))
	if len(r.f.problems) > 0 {
		b.WriteString("\nEvidence (first findings):\n\n")
		for _, p := range r.f.problems {
			b.WriteString("- " + p + "\n")
		}
	}
	b.WriteString("\n`hbctl verify` after the run:\n\n```\n" + r.f.verify + "\n```\n" + end + "\n")
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i >= 0 && j > i {
		s = s[:i] + b.String() + strings.TrimPrefix(s[j+len(end):], "\n")
	} else {
		s += b.String()
	}
	return os.WriteFile(path, []byte(s), 0o644)
}
