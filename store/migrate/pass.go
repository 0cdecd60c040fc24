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
	st, err := m.copySpans(ctx, t, differ)
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
	m.remember(t, &tableState{spans: spans, src: src})
	var differ []span
	for i, s := range spans {
		if src[i] != dst[i] {
			differ = append(differ, s)
		}
	}
	st, err := m.copySpans(ctx, t, differ)
	st.Chunks = len(spans)
	return st, err
}

// copySpans copies chunks of t, Parallel at a time.
func (m *Bucket) copySpans(ctx context.Context, t table, spans []span) (Stats, error) {
	var mu sync.Mutex
	st := Stats{Differ: len(spans)}
	g := newGroup(ctx, m.parallel())
	for _, s := range spans {
		g.Go(func(gctx context.Context) error {
			rows, deleted, err := m.copySpan(gctx, t, s)
			mu.Lock()
			defer mu.Unlock()
			st.Rows += rows
			st.Deleted += deleted
			return err
		})
	}
	return st, g.Wait()
}

// tableState is what the last Pass saw of a table on the source.
type tableState struct {
	spans []span
	src   []digest
}

func (m *Bucket) remember(t table, ts *tableState) {
	m.mu.Lock()
	defer m.mu.Unlock()
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
	rows, deleted, err := m.copySpan(ctx, t, s)
	st.Rows, st.Deleted = rows, deleted
	return st, "", src, err
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
	for attempt := 1; ; attempt++ {
		deleted, err = replaceSpan(ctx, dst, t, s, m.B, vals, cols)
		// Chunks of one table are copied at once: READ COMMITTED takes no
		// gap locks, but neighbours may still deadlock now and then.
		if !sqldb.IsRetryable(err) || attempt == 5 {
			break
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("migrate: copy %s %s: %w", t.name, s, err)
	}
	var n int64
	if cols > 0 {
		n = int64(len(vals) / cols)
	}
	return n, deleted, nil
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

// read returns the source's rows of chunk s of t, flattened, and the
// number of columns.
func (m *Bucket) read(ctx context.Context, t table, s span) ([]any, int, error) {
	where, args := s.where(t.key)
	rows, err := m.db(m.From, t).QueryContext(ctx, "SELECT * FROM "+t.name+" WHERE "+where+t.filter(m.B), args...)
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
