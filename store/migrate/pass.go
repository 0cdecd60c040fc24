package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/schema"
)

// Pass copies every chunk of the bucket whose rows differ between the
// source and the target. Run while the source serves, it brings the target
// close; run under the source's fence, it makes the target equal.
func (m *Bucket) Pass(ctx context.Context) (Stats, error) {
	st, _, err := m.compare(ctx, true)
	return st, err
}

// Verify compares every chunk of every table of the bucket, source against
// target, copying nothing: row counts, the digest of every column of
// every row, and money sums. It returns one line per chunk that differs.
func (m *Bucket) Verify(ctx context.Context) (Stats, []string, error) {
	return m.compare(ctx, false)
}

func (m *Bucket) compare(ctx context.Context, repair bool) (Stats, []string, error) {
	tables, err := m.tables(ctx)
	if err != nil {
		return Stats{}, nil, err
	}
	var (
		mu    sync.Mutex
		total Stats
		bad   []string
	)
	g := newGroup(ctx, m.parallel())
	for _, t := range tables {
		spans, err := m.spans(ctx, t)
		if err != nil {
			g.Wait() //nolint:errcheck // the first error is returned
			return total, nil, err
		}
		mu.Lock()
		total.Tables++
		mu.Unlock()
		for _, s := range spans {
			g.Go(func(gctx context.Context) error {
				st, line, err := m.chunkOnce(gctx, t, s, repair)
				mu.Lock()
				defer mu.Unlock()
				total.add(st)
				if line != "" {
					bad = append(bad, line)
				}
				return err
			})
		}
	}
	err = g.Wait()
	return total, bad, err
}

// chunkOnce compares one chunk and, when repair is set, copies it.
func (m *Bucket) chunkOnce(ctx context.Context, t table, s span, repair bool) (Stats, string, error) {
	st := Stats{Chunks: 1}
	var src, dst digest
	var srcErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		src, srcErr = m.digestOf(ctx, m.db(m.From, t), t, s)
	}()
	dst, err := m.digestOf(ctx, m.db(m.To, t), t, s)
	<-done
	if err == nil {
		err = srcErr
	}
	if err != nil {
		return st, "", err
	}
	if src == dst {
		return st, "", nil
	}
	st.Differ = 1
	if !repair {
		return st, fmt.Sprintf("%s %s: source %d rows (money %d), target %d rows (money %d), digests %016x / %016x",
			t.name, s, src.rows, src.money, dst.rows, dst.money, src.hash, dst.hash), nil
	}
	rows, deleted, err := m.copySpan(ctx, t, s)
	st.Rows, st.Deleted = rows, deleted
	return st, "", err
}

// copySpan replaces the target's rows of chunk s of t with the source's,
// in one transaction of the target.
func (m *Bucket) copySpan(ctx context.Context, t table, s span) (int64, int64, error) {
	vals, cols, err := m.read(ctx, t, s)
	if err != nil {
		return 0, 0, err
	}
	dst := m.db(m.To, t)
	if err := m.ensure(ctx, dst, t); err != nil {
		return 0, 0, err
	}
	var deleted int64
	where, args := s.where(t.key)
	err = schema.InTx(ctx, dst, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM "+t.name+" WHERE "+where+t.filter(m.B), args...)
		if err != nil {
			return err
		}
		deleted, _ = res.RowsAffected()
		const batch = 200
		for i := 0; i < len(vals); i += batch * cols {
			part := vals[i:min(len(vals), i+batch*cols)]
			tuple := "(" + schema.Placeholders(cols, "?") + ")"
			q := "INSERT INTO " + t.name + " VALUES " + schema.Placeholders(len(part)/cols, tuple)
			if _, err := tx.ExecContext(ctx, q, part...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("migrate: copy %s %s: %w", t.name, s, err)
	}
	var n int64
	if cols > 0 {
		n = int64(len(vals) / cols)
	}
	return n, deleted, nil
}

// read returns the source's rows of chunk s of t, flattened, and the
// number of columns.
func (m *Bucket) read(ctx context.Context, t table, s span) ([]any, int, error) {
	where, args := s.where(t.key)
	rows, err := m.db(m.From, t).QueryContext(ctx, "SELECT * FROM "+t.name+" WHERE "+where+t.filter(m.B), args...)
	if schema.IsMissingTable(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("migrate: read %s %s: %w", t.name, s, err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, 0, err
	}
	cols := len(names)
	var vals []any
	for rows.Next() {
		row := make([]any, cols)
		ptrs := make([]any, cols)
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, 0, err
		}
		vals = append(vals, row...)
	}
	return vals, cols, rows.Err()
}

// ensure creates t on db once per Bucket.
func (m *Bucket) ensure(ctx context.Context, db *sql.DB, t table) error {
	key := "ensure:" + t.name
	m.mu.Lock()
	_, done := m.cols[key]
	m.mu.Unlock()
	if done {
		return nil
	}
	for _, stmt := range t.create {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrate: create %s: %w", t.name, err)
		}
	}
	m.mu.Lock()
	if m.cols == nil {
		m.cols = map[string]string{}
	}
	m.cols[key] = ""
	m.mu.Unlock()
	return nil
}

// Drop deletes every row of bucket b from side s, after a move took them
// elsewhere: its day tables and their details, its idempotency keys,
// expiry and pending marks, and its archive tables.
func Drop(ctx context.Context, s Side, bucket hongbao.Bucket) error {
	b := &Bucket{B: bucket, From: s, To: s}
	tables, err := b.tables(ctx)
	if err != nil {
		return err
	}
	for _, t := range tables {
		_, err := b.db(s, t).ExecContext(ctx, "DELETE FROM "+t.name+" WHERE 1=1"+t.filter(b.B))
		if err != nil && !schema.IsMissingTable(err) {
			return fmt.Errorf("migrate: drop %s of bucket %d: %w", t.name, b.B, err)
		}
	}
	return nil
}

// group runs functions with at most limit at once and keeps the first
// error, cancelling the others' context.
type group struct {
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
	err    error
}

func newGroup(ctx context.Context, limit int) *group {
	ctx, cancel := context.WithCancel(ctx)
	return &group{ctx: ctx, cancel: cancel, sem: make(chan struct{}, limit)}
}

// Go runs fn once a slot is free.
func (g *group) Go(fn func(context.Context) error) {
	g.sem <- struct{}{}
	g.wg.Add(1)
	go func() {
		defer func() { <-g.sem; g.wg.Done() }()
		if err := fn(g.ctx); err != nil {
			g.once.Do(func() { g.err = err; g.cancel() })
		}
	}()
}

// Wait waits for every function and returns the first error.
func (g *group) Wait() error {
	g.wg.Wait()
	g.cancel()
	return g.err
}
