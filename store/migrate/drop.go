package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

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
		var err error
		if t.shared {
			err = dropShared(ctx, b.db(s, t), t, bucket)
		} else {
			_, err = b.db(s, t).ExecContext(ctx, "DELETE FROM "+t.name)
		}
		if err != nil && !sqldb.IsMissingTable(err) {
			return fmt.Errorf("migrate: drop %s of bucket %d: %w", t.name, bucket, err)
		}
	}
	return nil
}

// dropShared deletes bucket b's rows of a table other buckets share
// (hb_set.expiry, a database's t_idem) by primary key, in batches: a
// DELETE filtered by the bucket's bits would scan, and lock, every row of
// the table, stalling the sends and settlements of every other bucket.
func dropShared(ctx context.Context, db *sql.DB, t table, b hongbao.Bucket) error {
	cols := strings.Join(t.pk, ", ")
	rows, err := db.QueryContext(ctx, "SELECT "+cols+" FROM "+t.name+" WHERE 1=1"+t.filter(b))
	if err != nil {
		return err
	}
	var keys []any
	for rows.Next() {
		k := make([]any, len(t.pk))
		ptrs := make([]any, len(k))
		for i := range k {
			ptrs[i] = &k[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			rows.Close()
			return err
		}
		keys = append(keys, k...)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	n := len(t.pk)
	tuple := "(" + sqldb.Placeholders(n, "?") + ")"
	const batch = 500
	for i := 0; i < len(keys); i += batch * n {
		part := keys[i:min(len(keys), i+batch*n)]
		q := "DELETE FROM " + t.name + " WHERE (" + cols + ") IN (" + sqldb.Placeholders(len(part)/n, tuple) + ")" + t.filter(b)
		// READ COMMITTED: no gap locks, and a row read but not deleted
		// is not kept locked.
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, q, part...); err != nil {
			tx.Rollback() //nolint:errcheck // the error is returned
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
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
