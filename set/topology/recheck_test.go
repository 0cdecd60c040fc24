package topology

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
)

// stuckMeta is a meta database whose every query waits until its context
// ends, as one cut off by the network does: what a refresh then costs is
// what its context allows. It needs no server.
type stuckMeta struct{ queries chan context.Context }

func (m stuckMeta) Connect(context.Context) (driver.Conn, error) { return stuckConn(m), nil }
func (m stuckMeta) Driver() driver.Driver                        { return nil }

type stuckConn stuckMeta

func (c stuckConn) QueryContext(ctx context.Context, _ string, _ []driver.NamedValue) (driver.Rows, error) {
	c.queries <- ctx
	<-ctx.Done()
	return nil, ctx.Err()
}
func (stuckConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("stuckMeta: no prepare")
}
func (stuckConn) Close() error              { return nil }
func (stuckConn) Begin() (driver.Tx, error) { return nil, errors.New("stuckMeta: no transactions") }

// TestRecheckHonoursItsContext: Recheck's refresh ends with the caller's
// context (its deadline, its cancellation), not a second later, and a
// caller already gone sends no query.
func TestRecheckHonoursItsContext(t *testing.T) {
	queries := make(chan context.Context, 10)
	meta := sql.OpenDB(stuckMeta{queries})
	defer meta.Close()
	w := &Watcher{meta: meta, interval: time.Second, log: zap.NewNop()}
	w.cur.Store(&Map{Version: 1, Sets: []Set{{Name: "a"}}}) // a owns every bucket
	recheck := w.Recheck("a")

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if !recheck(ctx, 7) {
		t.Error("after a failed refresh, Recheck does not answer from the topology known")
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("Recheck with 50 ms left took %v: its refresh ignored the caller's deadline", took)
	}
	select {
	case q := <-queries:
		if d, ok := q.Deadline(); !ok || d.After(start.Add(100*time.Millisecond)) {
			t.Errorf("the refresh's query had deadline %v (set: %v); want the caller's, 50 ms after the start", d.Sub(start), ok)
		}
	default:
		t.Fatal("Recheck sent no query: it did not refresh")
	}

	time.Sleep(150 * time.Millisecond) // past the rate limit of forced refreshes
	gone, cancelGone := context.WithCancel(context.Background())
	cancelGone()
	if !recheck(gone, 7) {
		t.Error("with its caller gone, Recheck does not answer from the topology known")
	}
	select {
	case <-queries:
		t.Error("Recheck queried the meta database for a caller already gone")
	default:
	}

	// The caller cancels while the refresh waits: it returns then.
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan bool, 1)
	go func() { done <- recheck(ctx, 7) }()
	select {
	case <-queries:
	case <-time.After(5 * time.Second):
		t.Fatal("Recheck sent no query")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(500 * time.Millisecond):
		t.Fatal("Recheck still waits on its refresh after its caller cancelled")
	}
}
