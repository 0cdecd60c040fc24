package migrate

import (
	"context"
	"fmt"
	"sync"
)

// Verify compares every table of the bucket, source against target,
// copying nothing: row counts, the digest of every column of every row,
// and money sums, first of whole tables, then of the chunks of a table
// that differs. It returns one line per chunk that differs. Right after a
// Delta it compares the tables the Delta listed.
func (m *Bucket) Verify(ctx context.Context) (Stats, []string, error) {
	tables, frozen, err := m.verifyTables(ctx)
	if err != nil {
		return Stats{}, nil, err
	}
	var mu sync.Mutex
	var total Stats
	var bad []string
	g := newGroup(ctx, m.parallel())
	for _, t := range tables {
		mu.Lock()
		total.Tables++
		mu.Unlock()
		g.Go(func(gctx context.Context) error {
			var st Stats
			var lines []string
			var err error
			if ts := m.recalled(t); frozen && ts != nil {
				st, lines, err = m.verifyTarget(gctx, t, ts)
			} else {
				st, lines, err = m.verifyTable(gctx, t)
			}
			mu.Lock()
			defer mu.Unlock()
			total.add(st)
			bad = append(bad, lines...)
			return err
		})
	}
	err = g.Wait()
	return total, bad, err
}

func (m *Bucket) verifyTable(ctx context.Context, t table) (Stats, []string, error) {
	st, _, _, err := m.chunkOnce(ctx, t, span{}, false)
	if err != nil || st.Differ == 0 {
		return st, nil, err
	}
	spans, err := m.spans(ctx, t)
	if err != nil {
		return st, nil, err
	}
	var lines []string
	for _, s := range spans {
		cs, line, _, err := m.chunkOnce(ctx, t, s, false)
		if err != nil {
			return st, lines, err
		}
		st.Chunks += cs.Chunks
		if line != "" {
			lines = append(lines, line)
		}
	}
	return st, lines, nil
}

// verifyTables is the tables Delta listed, once, and true (a Verify under
// the fence follows a Delta, which read the source's digests of every
// chunk of them: only the target is left to read), or a fresh listing.
func (m *Bucket) verifyTables(ctx context.Context) ([]table, bool, error) {
	m.mu.Lock()
	tables := m.frozen
	m.frozen = nil
	m.mu.Unlock()
	if tables != nil {
		return tables, true, nil
	}
	tables, err := m.tables(ctx)
	return tables, false, err
}

// verifyTarget compares the target's chunks of t, in one scan, with the
// source's digests Delta read under the fence.
func (m *Bucket) verifyTarget(ctx context.Context, t table, ts *tableState) (Stats, []string, error) {
	dst, err := m.digestsOf(ctx, m.db(m.To, t), t, ts.spans)
	if err != nil {
		return Stats{}, nil, err
	}
	st := Stats{Chunks: len(ts.spans)}
	var lines []string
	for i, s := range ts.spans {
		if src := ts.src[i]; src != dst[i] {
			st.Differ++
			lines = append(lines, fmt.Sprintf("%s %s: source %d rows (money %d), target %d rows (money %d), digests %016x / %016x",
				t.name, s, src.rows, src.money, dst[i].rows, dst[i].money, src.hash, dst[i].hash))
		}
	}
	return st, lines, nil
}
