package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// findings are what the check found against the clients' record.
type findings struct {
	packets, shares   int // packets checked, shares in their details
	lost              int // acknowledged opens missing from the detail or with another amount; acknowledged sends missing
	doubled           int // a user twice in a detail; a credit or debit more than once
	sums              int // packets whose shares + remaining != total (or opens + remaining != count)
	unacked           int // shares in a detail that no client was told of (an answer lost for good)
	credits, debits   int // users credited, senders debited or refunded other than their packets say
	verify            string
	verifyOK          bool
	problems          []string // the first of each kind, as evidence
	outboxLeft        int
	voids             int // sends the settler's sweeper voided (a pending packet whose debit never came)
	detailErrs        int
	conflictingAnswer int64
	// lostAt and doubledAt are when each lost or doubled answer was
	// acknowledged (its fault's window); zero when no moment is known (a
	// ledger entry twice).
	lostAt, doubledAt []time.Time
}

// lose counts a lost acknowledged answer, acknowledged at at.
func (f *findings) lose(at time.Time) {
	f.lost++
	f.lostAt = append(f.lostAt, at)
}

// double counts a doubled answer, acknowledged at at.
func (f *findings) double(at time.Time) {
	f.doubled++
	f.doubledAt = append(f.doubledAt, at)
}

func (f *findings) note(format string, args ...any) {
	if len(f.problems) < 20 {
		f.problems = append(f.problems, fmt.Sprintf(format, args...))
	}
}

// drain waits until every packet has expired (plus the settler's rounds)
// and every SET's outbox is empty, for at most limit.
func drain(ctx context.Context, sets []string, expiresBy time.Time, limit time.Duration) (int, error) {
	deadline := time.Now().Add(limit)
	if wait := time.Until(expiresBy); wait > 0 {
		time.Sleep(wait)
	}
	dbs := make([]*sql.DB, 0, len(sets))
	for _, dsn := range sets {
		db, err := sqldb.Open(dsn, 1)
		if err != nil {
			return 0, err
		}
		defer db.Close()
		dbs = append(dbs, db)
	}
	for {
		left, pending := 0, 0
		for _, db := range dbs {
			var n, p int
			if err := db.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM hb_set.outbox), (SELECT COUNT(*) FROM hb_set.expiry WHERE expires_at < UTC_TIMESTAMP(3))").Scan(&n, &p); err != nil {
				left = -1
				break
			}
			left += n
			pending += p
		}
		if left == 0 && pending == 0 {
			return 0, nil
		}
		if time.Now().After(deadline) {
			return left + pending, nil
		}
		time.Sleep(time.Second)
	}
}

// check holds the system to the clients' record: each packet's detail
// through the router, each user's ledger in the wallet, and hbctl verify.
func check(ctx context.Context, l *load, walletDSN, hbctl, config string) (findings, error) {
	var f findings
	f.conflictingAnswer = l.conflictAmounts.Load()
	l.mu.Lock()
	packets := l.packets
	l.mu.Unlock()
	// Expected ledger per user, from the details (which hold every
	// acknowledged open, or the check says lost).
	credit := map[hongbao.UserID]int64{}
	debit := map[hongbao.UserID]int64{}
	refund := map[hongbao.UserID]int64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, p := range packets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d, err := l.detail(ctx, p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				f.detailErrs++
				f.lose(p.sentAt)
				f.note("packet %s (acknowledged send): %v", p.id, err)
				return
			}
			f.packets++
			debit[p.sender] += p.total
			refund[p.sender] += d.RemainingAmount
			if d.Total != p.total || d.Count != p.count {
				f.lose(p.sentAt)
				f.note("packet %s: sent %d fen / %d shares, detail says %d / %d", p.id, p.total, p.count, d.Total, d.Count)
			}
			seen := map[hongbao.UserID]int64{}
			var sum int64
			for _, r := range d.Records {
				u, err := hongbao.ParseUserID(r.User)
				if err != nil {
					continue
				}
				if _, dup := seen[u]; dup {
					f.double(p.sentAt)
					f.note("packet %s: user %s twice in the detail", p.id, u)
				}
				seen[u] = r.Amount
				sum += r.Amount
				credit[u] += r.Amount
			}
			f.shares += len(d.Records)
			if sum+d.RemainingAmount != d.Total || len(d.Records)+d.RemainingCount != d.Count {
				f.sums++
				f.note("packet %s: shares %d + remaining %d != total %d (or %d opens + %d != %d)", p.id, sum, d.RemainingAmount, d.Total, len(d.Records), d.RemainingCount, d.Count)
			}
			p.mu.Lock()
			for u, amt := range p.opens {
				if got, ok := seen[u]; !ok || got != amt {
					f.lose(p.openAt[u])
					f.note("packet %s: open by %s acknowledged with %d fen, detail has %d (present %v)", p.id, u, amt, got, ok)
				}
			}
			for u := range seen {
				if _, ok := p.opens[u]; !ok {
					f.unacked++
				}
			}
			p.mu.Unlock()
		})
	}
	wg.Wait()
	if err := ledger(ctx, walletDSN, l, credit, debit, refund, &f); err != nil {
		return f, err
	}
	out, err := exec.CommandContext(ctx, hbctl, "verify", "-config", config).CombinedOutput()
	f.verify, f.verifyOK = strings.TrimSpace(string(out)), err == nil
	return f, nil
}

// detail reads p's detail through the router as its sender.
func (l *load) detail(ctx context.Context, p *packet) (api.PacketJSON, error) {
	var pj api.PacketJSON
	var a answer
	for range 10 {
		a = l.do(ctx, p.sender, http.MethodGet, "/v1/packets/"+p.id.String(), "", "")
		if a.status == http.StatusOK {
			return pj, json.Unmarshal(a.body, &pj)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return pj, fmt.Errorf("detail: %d %s", a.status, a.code)
}

// ledger compares each of the run's users' ledger entries with what their
// packets and shares say: credits = their shares, debits = their packets'
// totals, refunds = what was left in them, each entry once.
func ledger(ctx context.Context, dsn string, l *load, credit, debit, refund map[hongbao.UserID]int64, f *findings) error {
	db, err := sqldb.Open(dsn, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT user_id, kind, SUM(amount), COUNT(*), COUNT(DISTINCT entry_key) FROM ledger
		WHERE user_id > ? AND user_id <= ? AND kind IN ('open', 'send', 'refund', 'void') GROUP BY user_id, kind`, int64(l.users), int64(l.users)+1<<20)
	if err != nil {
		return fmt.Errorf("wallet: %w", err)
	}
	defer rows.Close()
	got := map[string]map[hongbao.UserID]int64{"open": {}, "send": {}, "refund": {}, "void": {}}
	for rows.Next() {
		var u hongbao.UserID
		var kind string
		var sum int64
		var n, distinct int
		if err := rows.Scan(&u, &kind, &sum, &n, &distinct); err != nil {
			return err
		}
		if n != distinct {
			f.double(time.Time{})
			f.note("user %s: %d %s entries under %d keys", u, n, kind, distinct)
		}
		got[kind][u] = sum
		if kind == "void" {
			f.voids += n
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range []struct {
		kind string
		want map[hongbao.UserID]int64
		sign int64
		bad  *int
	}{{"open", credit, 1, &f.credits}, {"send", debit, -1, &f.debits}, {"refund", refund, 1, &f.debits}} {
		for u, w := range c.want {
			if g := got[c.kind][u]; g != c.sign*w {
				*c.bad++
				f.note("user %s: %s entries %d fen, its packets and shares say %d", u, c.kind, g, c.sign*w)
			}
		}
		for u, g := range got[c.kind] {
			if _, ok := c.want[u]; !ok && g != 0 {
				*c.bad++
				f.note("user %s: %s entries %d fen, none expected", u, c.kind, g)
			}
		}
	}
	return nil
}
