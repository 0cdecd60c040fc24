package store

// A database/sql connector for the golden tests of the open transaction's
// SQL (opensql_test.go): it records every statement the store sends, with
// its arguments as the store passed them (Go types kept), and answers from
// an in-memory SET that owns every bucket. No MySQL is involved: the
// integration tests prove the SQL right against MariaDB, these pin its text.

import (
	"context"
	"database/sql/driver"
	"fmt"
	"io"
	"strings"
	"sync"

	hongbao "github.com/hongbao-dev/hongbao"
)

// world is what the in-memory SET holds before the transaction: its
// packets and their shares. The recorder never changes it.
type world struct {
	packets map[hongbao.PacketID]hongbao.Packet
	shares  map[hongbao.PacketID]map[hongbao.UserID]int64
}

// recorded is one statement sent: BEGIN, COMMIT and ROLLBACK stand for
// the transaction's ends.
type recorded struct {
	query string
	args  []any
}

// recorder is the connector.
type recorder struct {
	world world
	mu    sync.Mutex
	log   []recorded
	// writeErrs are the answers to the write blocks, in turn: nil, or none
	// left, is success.
	writeErrs []error
}

func (r *recorder) Connect(context.Context) (driver.Conn, error) { return &recConn{r: r}, nil }
func (r *recorder) Driver() driver.Driver                        { return recDriver{r} }

func (r *recorder) record(q string, args []driver.NamedValue) {
	var vs []any
	for _, a := range args {
		vs = append(vs, a.Value)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, recorded{query: q, args: vs})
}

// statements returns what was sent so far.
func (r *recorder) statements() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.log...)
}

type recDriver struct{ r *recorder }

func (d recDriver) Open(string) (driver.Conn, error) { return &recConn{r: d.r}, nil }

// recConn takes the statements unprepared, through QueryContext and
// ExecContext; it refuses a prepare, which the open transaction never asks.
type recConn struct{ r *recorder }

func (c *recConn) Prepare(q string) (driver.Stmt, error) {
	return nil, fmt.Errorf("recorder: prepare of %q: not supported", q)
}

func (c *recConn) Close() error { return nil }

func (c *recConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *recConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	c.r.record("BEGIN", nil)
	return recTx{c.r}, nil
}

// CheckNamedValue accepts every argument as it is, so the log shows the
// Go types the store passed (a PacketID, an int bucket, a time).
func (c *recConn) CheckNamedValue(*driver.NamedValue) error { return nil }

func (c *recConn) QueryContext(_ context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	if strings.HasPrefix(q, "SELECT 1 FROM ") && strings.HasSuffix(q, ".t_audience LIMIT 0") {
		// The store's once-per-process ensure probing its table, before
		// any transaction: it exists.
		return &recRows{sets: []resultSet{{cols: []string{"1"}}}}, nil
	}
	c.r.record(q, args)
	vs := make([]any, len(args))
	for i, a := range args {
		vs[i] = a.Value
	}
	switch {
	case strings.HasPrefix(q, "SELECT bucket FROM hb_fence.owned"):
		return c.r.world.read(q, vs)
	case strings.HasPrefix(q, "(SELECT packet_id, user_id, amount FROM"):
		return c.r.world.openers(vs)
	}
	return nil, fmt.Errorf("recorder: query not expected: %s", q)
}

func (c *recConn) ExecContext(_ context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if strings.HasPrefix(q, "CREATE TABLE IF NOT EXISTS ") && strings.Contains(q, ".t_audience") {
		return driver.RowsAffected(0), nil // the store's once-per-process ensure, before any transaction
	}
	c.r.record(q, args)
	if !strings.HasPrefix(q, "BEGIN NOT ATOMIC") {
		return nil, fmt.Errorf("recorder: statement not expected: %s", q)
	}
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	if len(c.r.writeErrs) > 0 {
		err := c.r.writeErrs[0]
		c.r.writeErrs = c.r.writeErrs[1:]
		if err != nil {
			return nil, err
		}
	}
	return driver.RowsAffected(0), nil
}

type recTx struct{ r *recorder }

func (t recTx) Commit() error   { t.r.record("COMMIT", nil); return nil }
func (t recTx) Rollback() error { t.r.record("ROLLBACK", nil); return nil }

// read answers the open read (readForOpen): the fence's rows (every bucket
// asked for is owned), the packets locked that exist, and the shares asked
// for that exist. It walks the arguments by type: the SET's name, the int
// buckets, a PacketID per FOR UPDATE part, then each shares part's
// PacketID followed by its UserIDs.
func (w world) read(q string, args []any) (driver.Rows, error) {
	fence := resultSet{cols: []string{"bucket"}}
	i := 1 // args[0] is the SET's name
	for ; i < len(args); i++ {
		b, ok := args[i].(int)
		if !ok {
			break
		}
		fence.rows = append(fence.rows, []driver.Value{int64(b)})
	}
	packets := resultSet{cols: []string{"id", "sender", "type", "total", "count", "greeting", "remaining_amount",
		"remaining_count", "created_at", "expires_at", "closed", "funding"}}
	for range strings.Count(q, " FOR UPDATE)") {
		id, ok := args[i].(hongbao.PacketID)
		if !ok {
			return nil, fmt.Errorf("recorder: argument %d of the read is %T, want the PacketID of a lock", i, args[i])
		}
		i++
		if p, ok := w.packets[id]; ok {
			packets.rows = append(packets.rows, []driver.Value{int64(p.ID), int64(p.Sender), string(p.Type), p.Total,
				int64(p.Count), p.Greeting, p.RemainingAmount, int64(p.RemainingCount), p.CreatedAt, p.ExpiresAt, p.Closed, int64(p.Funding)})
		}
	}
	shares := resultSet{cols: []string{"packet_id", "user_id", "amount"}}
	var id hongbao.PacketID
	for ; i < len(args); i++ {
		switch a := args[i].(type) {
		case hongbao.PacketID:
			id = a
		case hongbao.UserID:
			if amount, ok := w.shares[id][a]; ok {
				shares.rows = append(shares.rows, []driver.Value{int64(id), int64(a), amount})
			}
		default:
			return nil, fmt.Errorf("recorder: argument %d of the read is %T", i, a)
		}
	}
	// The audiences' parts name their packets too (read above as shares
	// parts without users); the golden packets have none.
	audiences := resultSet{cols: []string{"packet_id", "users"}}
	return &recRows{sets: []resultSet{fence, packets, shares, audiences}}, nil
}

// openers answers the openers read (openersOf) with the shares the packets
// had before the transaction: the golden tests print no openers.
func (w world) openers(args []any) (driver.Rows, error) {
	rs := resultSet{cols: []string{"packet_id", "user_id", "amount"}}
	for _, a := range args {
		id, ok := a.(hongbao.PacketID)
		if !ok {
			return nil, fmt.Errorf("recorder: argument of the openers read is %T", a)
		}
		for u, amount := range w.shares[id] {
			rs.rows = append(rs.rows, []driver.Value{int64(id), int64(u), amount})
		}
	}
	return &recRows{sets: []resultSet{rs}}, nil
}

type resultSet struct {
	cols []string
	rows [][]driver.Value
}

// recRows are result sets in turn, as a multi-statement answers.
type recRows struct {
	sets     []resultSet
	set, row int
}

func (r *recRows) Columns() []string { return r.sets[r.set].cols }
func (r *recRows) Close() error      { return nil }

func (r *recRows) Next(dest []driver.Value) error {
	rs := r.sets[r.set]
	if r.row >= len(rs.rows) {
		return io.EOF
	}
	copy(dest, rs.rows[r.row])
	r.row++
	return nil
}

func (r *recRows) HasNextResultSet() bool { return r.set+1 < len(r.sets) }

func (r *recRows) NextResultSet() error {
	if !r.HasNextResultSet() {
		return io.EOF
	}
	r.set, r.row = r.set+1, 0
	return nil
}
