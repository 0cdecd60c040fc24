package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/schema"
)

// job is one open to make.
type job struct {
	id   hongbao.PacketID
	user hongbao.UserID
}

// result is one design's run of one scenario.
type result struct {
	scenario, design string
	clients          int
	answers          int // final answers
	opened           int // answers that took a share
	openedSum        int64
	busy             int // busy answers retried
	errors           int // client-visible failures
	firstErr         string
	took             time.Duration
	drained          time.Duration // after took, until every share answered was in MySQL
	lat              []time.Duration
	commits          int64
	invariants       string
}

func (r *result) rate() float64 { return float64(r.answers) / r.took.Seconds() }

// durableRate counts the time until MySQL had every share answered: the
// same as rate for a design that answers after its commit, lower for one
// that answers first and writes later.
func (r *result) durableRate() float64 {
	return float64(r.answers) / (r.took + r.drained).Seconds()
}

func (r *result) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)-1, int(float64(len(r.lat))*p))]
}

// drive runs clients goroutines taking jobs from next until it is empty or
// the deadline passes. Busy answers are retried (after a short pause) and
// counted; anything else is a final answer.
func drive(ctx context.Context, d design, clients int, dur time.Duration, next func() (job, bool)) *result {
	r := &result{design: d.name(), clients: clients}
	var mu sync.Mutex
	var busy atomic.Int64
	deadline := time.Now().Add(dur)
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1024)
			var answers, opened, errs int
			var sum int64
			var firstErr string
			for time.Now().Before(deadline) {
				j, ok := next()
				if !ok {
					break
				}
				t0 := time.Now()
				amount, err := openRetrying(ctx, d, j, &busy)
				lat = append(lat, time.Since(t0))
				answers++
				switch {
				case err == nil:
					opened++
					sum += amount
				case errors.Is(err, hongbao.ErrSoldOut), errors.Is(err, hongbao.ErrAlreadyOpened):
				default:
					errs++
					if firstErr == "" {
						firstErr = err.Error()
					}
				}
			}
			mu.Lock()
			r.lat = append(r.lat, lat...)
			r.answers += answers
			r.opened += opened
			r.openedSum += sum
			r.errors += errs
			if r.firstErr == "" {
				r.firstErr = firstErr
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	r.took = time.Since(start)
	r.busy = int(busy.Load())
	slices.Sort(r.lat)
	return r
}

// openRetrying opens, retrying busy answers as a client following
// Retry-After would (bounded, with a short pause).
func openRetrying(ctx context.Context, d design, j job, busy *atomic.Int64) (int64, error) {
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		amount, err := d.open(cctx, j.id, j.user)
		cancel()
		if !errors.Is(err, hongbao.ErrBusy) || attempt >= 100 {
			return amount, err
		}
		busy.Add(1)
		time.Sleep(time.Duration(1+rand.IntN(5)) * time.Millisecond)
	}
}

// commits reads MariaDB's commit counter.
func commits(ctx context.Context, db *sql.DB) int64 {
	n, _ := status(ctx, db, "Com_commit") // 0 on error: the column shows it
	return n
}

// quiesce waits (30 s at most each) for InnoDB to finish what earlier runs
// left it, so that no run pays for the one before: first the purge of what
// their cleanup deleted (seconds of CPU after a hot run; the database is
// idle when its buffer pool sees almost no writes for 200 ms), then the
// flushing of their dirty pages, which would otherwise trickle out at
// innodb_io_capacity and slow the commits' fsyncs of the next run.
func quiesce(ctx context.Context, db *sql.DB) {
	last := int64(-1)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; {
		n, err := status(ctx, db, "Innodb_buffer_pool_write_requests")
		if err != nil || (last >= 0 && n-last < 1000) {
			break
		}
		last = n
		time.Sleep(200 * time.Millisecond)
	}
	var pct, io, ioMax string
	if db.QueryRowContext(ctx, "SELECT @@innodb_max_dirty_pages_pct, @@innodb_io_capacity, @@innodb_io_capacity_max").Scan(&pct, &io, &ioMax) != nil {
		return
	}
	// Flush now, as fast as the disk goes, instead of at innodb_io_capacity.
	if _, err := db.ExecContext(ctx, "SET GLOBAL innodb_io_capacity_max = 100000, innodb_io_capacity = 50000, innodb_max_dirty_pages_pct = 0"); err != nil {
		return // no privilege: run anyway
	}
	defer db.ExecContext(context.WithoutCancel(ctx), //nolint:errcheck // best effort: the next run sets them again
		"SET GLOBAL innodb_max_dirty_pages_pct = "+pct+", innodb_io_capacity = "+io+", innodb_io_capacity_max = "+ioMax)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; {
		if n, err := status(ctx, db, "Innodb_buffer_pool_pages_dirty"); err != nil || n < 100 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// status reads one of MySQL's global status counters.
func status(ctx context.Context, db *sql.DB, name string) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE ?", name).Scan(&name, &n)
	return n, err
}

// seed inserts funded packets straight into their day tables, many per
// statement (the bench measures opens, not sends).
func seed(ctx context.Context, db *sql.DB, loc *time.Location, ps []*hongbao.Packet) error {
	en := schema.NewEnsurer(db)
	if err := en.EnsureSet(ctx); err != nil {
		return err
	}
	byTable := map[hongbao.DayTable][]*hongbao.Packet{}
	for _, p := range ps {
		t := p.ID.Table(loc)
		byTable[t] = append(byTable[t], p)
	}
	for t, group := range byTable {
		if err := en.Ensure(ctx, t); err != nil {
			return err
		}
		for len(group) > 0 {
			n := min(len(group), 500)
			var vals []string
			var args []any
			for _, p := range group[:n] {
				vals = append(vals, "(?,?,?,?,?,?,?,?,?,?,1)")
				args = append(args, p.ID, p.Sender, string(p.Type), p.Total, p.Count, "", p.Total, p.Count,
					p.ID.Time().UTC(), p.ID.Time().Add(24*time.Hour).UTC())
			}
			if _, err := db.ExecContext(ctx, "INSERT INTO "+t.Packets()+" (id, sender, type, total, count, greeting, remaining_amount, remaining_count, created_at, expires_at, funding) VALUES "+
				strings.Join(vals, ","), args...); err != nil {
				return fmt.Errorf("seed %s: %w", t.Packets(), err)
			}
			group = group[n:]
		}
	}
	return nil
}

// newPackets mints n packets of count shares in random buckets.
func newPackets(m *hongbao.Minter, n int, total int64, count int, typ hongbao.Type) ([]*hongbao.Packet, error) {
	ps := make([]*hongbao.Packet, n)
	for i := range ps {
		id, err := m.Next(hongbao.Bucket(rand.IntN(hongbao.Buckets)))
		if err != nil {
			return nil, err
		}
		ps[i] = &hongbao.Packet{ID: id, Sender: 1, Type: typ, Total: total, Count: count, Funding: hongbao.Funded}
	}
	return ps, nil
}

// check verifies invariants 1 and 2 for the packets of a run and that every
// share answered was written: the answers' count and sum equal the rows'.
func check(ctx context.Context, db *sql.DB, loc *time.Location, ps []*hongbao.Packet, r *result) string {
	byTable := map[hongbao.DayTable][]any{}
	for _, p := range ps {
		t := p.ID.Table(loc)
		byTable[t] = append(byTable[t], p.ID)
	}
	var rows int
	var sum int64
	var bad []string
	for t, ids := range byTable {
		in := "(?" + strings.Repeat(",?", len(ids)-1) + ")"
		q := `SELECT p.id, p.total, p.count, p.remaining_amount, p.remaining_count, COALESCE(d.s,0), COALESCE(d.n,0), COALESCE(d.m,1), COALESCE(d.u,0)
			FROM ` + t.Packets() + ` p LEFT JOIN (SELECT packet_id, SUM(amount) s, COUNT(*) n, MIN(amount) m, COUNT(DISTINCT user_id) u FROM ` +
			t.Details() + ` WHERE packet_id IN ` + in + ` GROUP BY packet_id) d ON d.packet_id = p.id WHERE p.id IN ` + in
		res, err := db.QueryContext(ctx, q, append(slices.Clone(ids), ids...)...)
		if err != nil {
			return "check failed: " + err.Error()
		}
		for res.Next() {
			var id, total, remA, s, m int64
			var count, remC, n, u int
			if err := res.Scan(&id, &total, &count, &remA, &remC, &s, &n, &m, &u); err != nil {
				res.Close()
				return "check failed: " + err.Error()
			}
			if s+remA != total || n+remC != count || m < 1 || u != n {
				bad = append(bad, fmt.Sprintf("packet %d: %d+%d/%d fen, %d+%d/%d shares", id, s, remA, total, n, remC, count))
			}
			rows += n
			sum += s
		}
		res.Close()
	}
	if rows != r.opened || sum != r.openedSum {
		bad = append(bad, fmt.Sprintf("%d shares (%d fen) answered but %d (%d fen) in MySQL", r.opened, r.openedSum, rows, sum))
	}
	if len(bad) > 0 {
		return fmt.Sprintf("VIOLATED (%d): %s", len(bad), bad[0])
	}
	return "held"
}

// cleanup deletes a run's packets, shares and credits once checked, so runs
// do not slow each other down with tables no settler or archiver drains.
func cleanup(ctx context.Context, db *sql.DB, loc *time.Location, ps []*hongbao.Packet) error {
	byTable := map[hongbao.DayTable][]any{}
	for _, p := range ps {
		byTable[p.ID.Table(loc)] = append(byTable[p.ID.Table(loc)], p.ID)
	}
	for t, ids := range byTable {
		for len(ids) > 0 {
			n := min(len(ids), 500)
			in := "(?" + strings.Repeat(",?", n-1) + ")"
			for _, q := range []string{
				"DELETE FROM hb_set.outbox WHERE packet_id IN " + in,
				"DELETE FROM hb_set.expiry WHERE packet_id IN " + in, // packets sent through the server
				"DELETE FROM " + t.Details() + " WHERE packet_id IN " + in,
				"DELETE FROM " + t.Packets() + " WHERE id IN " + in,
			} {
				if _, err := db.ExecContext(ctx, q, ids[:n]...); err != nil {
					return fmt.Errorf("cleanup: %w", err)
				}
			}
			ids = ids[n:]
		}
	}
	return nil
}
