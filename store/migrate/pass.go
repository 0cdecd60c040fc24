package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Pass copies every chunk of the bucket whose rows differ between the
// source and the target (each table digested in one scan per side, by
// chunk), and remembers the source's digest of every chunk for Delta. Run
// while the source serves, it brings the target close.
func (m *Bucket) Pass(ctx context.Context) (Stats, error) {
	tables, err := m.tables(ctx)
	if err != nil {
		return Stats{}, err
	}
	var mu sync.Mutex
	var total Stats
	g := newGroup(ctx, m.parallel())
	for _, t := range tables {
		g.Go(func(gctx context.Context) error {
			st, err := m.compareTable(gctx, t)
			mu.Lock()
			defer mu.Unlock()
			total.add(st)
			total.Tables++
			return err
		})
	}
	return total, g.Wait()
}

// Delta copies what changed on the source since the last Pass, reading
// only the source, one scan per table: a chunk whose digest is the one
// the last pass saw holds on the target what the source holds (it was
// equal then, or copied then), the others are copied. Run under the
// source's fence it makes the target equal to the source at a fraction of
// a Pass's cost: the freeze. It lists the tables again (a day's details
// table may have come since the last pass, with rows): a table the last
// pass did not see is compared as Pass does.
func (m *Bucket) Delta(ctx context.Context) (Stats, error) {
	tables, err := m.tables(ctx)
	if err != nil {
		return Stats{}, err
	}
	m.mu.Lock()
	m.frozen = tables // Verify compares these
	m.mu.Unlock()
	var mu sync.Mutex
	var total Stats
	g := newGroup(ctx, m.parallel())
	for _, t := range tables {
		ts := m.recalled(t)
		g.Go(func(gctx context.Context) error {
			var st Stats
			var err error
			if ts == nil {
				st, err = m.compareTable(gctx, t)
			} else {
				st, err = m.deltaTable(gctx, t, ts)
			}
			mu.Lock()
			defer mu.Unlock()
			total.add(st)
			total.Tables++
			return err
		})
	}
	return total, g.Wait()
}

func (m *Bucket) deltaTable(ctx context.Context, t table, ts *tableState) (Stats, error) {
	now, err := m.digestsOf(ctx, m.db(m.From, t), t, ts.spans)
	if err != nil {
		return Stats{}, err
	}
	var differ []span
	for i, s := range ts.spans {
		if now[i] != ts.src[i] {
			differ = append(differ, s)
		}
	}
	// What the source holds now, under the fence: Verify compares the
	// target with it.
	m.remember(t, &tableState{spans: ts.spans, src: now})
	// Frozen, the source holds what was just digested: no digest of the
	// copies on the freeze's time.
	st, _, err := m.copySpans(ctx, t, differ, false)
	st.Chunks = len(ts.spans)
	return st, err
}

// compareTable is Pass for one table: its chunks digested on both sides,
// those that differ copied, the source's digests remembered.
func (m *Bucket) compareTable(ctx context.Context, t table) (Stats, error) {
	spans, err := m.spans(ctx, t)
	if err != nil {
		return Stats{}, err
	}
	var src, dst []digest
	var srcErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		src, srcErr = m.digestsOf(ctx, m.db(m.From, t), t, spans)
	}()
	dst, err = m.digestsOf(ctx, m.db(m.To, t), t, spans)
	<-done
	if err == nil {
		err = srcErr
	}
	if err != nil {
		return Stats{}, err
	}
	var differ []span
	var at []int
	for i, s := range spans {
		if src[i] != dst[i] {
			differ, at = append(differ, s), append(at, i)
		}
	}
	st, copied, err := m.copySpans(ctx, t, differ, true)
	st.Chunks = len(spans)
	if err != nil {
		m.remember(t, nil) // a chunk copied in part: the next Delta compares the table again
		return st, err
	}
	// A copied chunk holds on the target what the source held when it
	// was read, not when it was digested above: a row that came between
	// the two and went before the freeze would otherwise be taken for
	// unchanged by Delta and left on the target.
	for k, i := range at {
		src[i] = copied[k]
	}
	m.remember(t, &tableState{spans: spans, src: src})
	return st, nil
}

// copySpans copies chunks of t, Parallel at a time, and, with digests,
// returns the source's digest of what it copied of each.
func (m *Bucket) copySpans(ctx context.Context, t table, spans []span, digests bool) (Stats, []digest, error) {
	var mu sync.Mutex
	st := Stats{Differ: len(spans)}
	copied := make([]digest, len(spans))
	g := newGroup(ctx, m.parallel())
	for i, s := range spans {
		g.Go(func(gctx context.Context) error {
			rows, deleted, d, err := m.copySpan(gctx, t, s, digests)
			mu.Lock()
			defer mu.Unlock()
			st.Rows += rows
			st.Deleted += deleted
			copied[i] = d
			return err
		})
	}
	return st, copied, g.Wait()
}

// tableState is what the last Pass saw of a table on the source.
type tableState struct {
	spans []span
	src   []digest
}

// remember keeps ts as what the source holds of t; nil forgets t.
func (m *Bucket) remember(t table, ts *tableState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ts == nil {
		delete(m.state, t.name)
		return
	}
	if m.state == nil {
		m.state = map[string]*tableState{}
	}
	m.state[t.name] = ts
}

func (m *Bucket) recalled(t table) *tableState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state[t.name]
}

// chunkOnce compares one chunk and, when repair is set, copies it. It
// returns the source's digest of the chunk.
func (m *Bucket) chunkOnce(ctx context.Context, t table, s span, repair bool) (Stats, string, digest, error) {
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
		return st, "", src, err
	}
	if src == dst {
		return st, "", src, nil
	}
	st.Differ = 1
	if !repair {
		return st, fmt.Sprintf("%s %s: source %d rows (money %d), target %d rows (money %d), digests %016x / %016x",
			t.name, s, src.rows, src.money, dst.rows, dst.money, src.hash, dst.hash), src, nil
	}
	rows, deleted, copied, err := m.copySpan(ctx, t, s, true)
	st.Rows, st.Deleted = rows, deleted
	return st, "", copied, err
}

// copySpan replaces the target's rows of chunk s of t with the source's,
// in one transaction of the target, and, withDigest, returns the
// source's digest of the rows it copied (read with them, from one
// snapshot).
func (m *Bucket) copySpan(ctx context.Context, t table, s span, withDigest bool) (int64, int64, digest, error) {
	if m.beforeCopy != nil {
		m.beforeCopy(t.name)
	}
	var vals []any
	var cols int
	var d digest
	var err error
	if withDigest {
		vals, cols, d, err = m.snapshot(ctx, t, s)
	} else {
		vals, cols, err = m.read(ctx, m.db(m.From, t), t, s)
	}
	if err != nil {
		return 0, 0, digest{}, err
	}
	dst := m.db(m.To, t)
	if err := m.ensure(ctx, dst, t); err != nil {
		return 0, 0, digest{}, err
	}
	var deleted int64
	for attempt := 1; ; attempt++ {
		deleted, err = replaceSpan(ctx, dst, t, s, m.B, vals, cols)
		// Chunks of one table are copied at once: READ COMMITTED takes no
		// gap locks, but neighbours may still deadlock now and then.
		if !sqldb.IsRetryable(err) || attempt == 5 {
			break
		}
	}
	if err != nil {
		return 0, 0, digest{}, fmt.Errorf("migrate: copy %s %s: %w", t.name, s, err)
	}
	var n int64
	if cols > 0 {
		n = int64(len(vals) / cols)
	}
	return n, deleted, d, nil
}

// replaceSpan deletes the target's rows of chunk s and inserts vals, in
// one READ COMMITTED transaction.
func replaceSpan(ctx context.Context, dst *sql.DB, t table, s span, b hongbao.Bucket, vals []any, cols int) (int64, error) {
	tx, err := dst.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	where, args := s.where(t.key)
	res, err := tx.ExecContext(ctx, "DELETE FROM "+t.name+" WHERE "+where+t.filter(b), args...)
	if err != nil {
		return 0, err
	}
	deleted, _ := res.RowsAffected()
	const batch = 200
	for i := 0; i < len(vals); i += batch * cols {
		part := vals[i:min(len(vals), i+batch*cols)]
		tuple := "(" + sqldb.Placeholders(cols, "?") + ")"
		q := "INSERT INTO " + t.name + " VALUES " + sqldb.Placeholders(len(part)/cols, tuple)
		if _, err := tx.ExecContext(ctx, q, part...); err != nil {
			return 0, err
		}
	}
	return deleted, tx.Commit()
}

// snapshot reads the source's rows of chunk s of t and their digest from
// one consistent snapshot (a read-only REPEATABLE READ transaction).
func (m *Bucket) snapshot(ctx context.Context, t table, s span) ([]any, int, digest, error) {
	tx, err := m.db(m.From, t).BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, 0, digest{}, fmt.Errorf("migrate: read %s %s: %w", t.name, s, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	vals, cols, err := m.read(ctx, tx, t, s)
	if err != nil {
		return nil, 0, digest{}, err
	}
	d, err := m.digestOf(ctx, tx, t, s)
	if err != nil {
		return nil, 0, digest{}, err
	}
	return vals, cols, d, tx.Commit()
}

// read returns the source's rows of chunk s of t, flattened, and the
// number of columns.
func (m *Bucket) read(ctx context.Context, q querier, t table, s span) ([]any, int, error) {
	where, args := s.where(t.key)
	rows, err := q.QueryContext(ctx, "SELECT * FROM "+t.name+" WHERE "+where+t.filter(m.B), args...)
	if sqldb.IsMissingTable(err) {
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
