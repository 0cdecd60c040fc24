package topology

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// The steps of one bucket's move, in order. A move is resumable from
// every step before Disowning (its copy is idempotent and the source's
// fence is only held inside an open transaction, which MySQL rolls back
// when the mover dies); from Disowning on it only goes forward.
const (
	Planned    = "planned"     // not begun
	Copying    = "copying"     // first copy, while the source serves
	CatchingUp = "catching_up" // copying what changed meanwhile
	Frozen     = "frozen"      // the source's fence held: last delta, verify
	Disowning  = "disowning"   // verified; the source gives the bucket up
	Published  = "published"   // the topology names the target
	Done       = "done"        // the source's copy deleted
	Failed     = "failed"      // stopped (a verify mismatch); the source serves
)

// Rebalance states.
const (
	Running  = "running"
	Finished = "done"
	Stopped  = "failed"
)

// Move is one bucket's move in the journal.
type Move struct {
	Rebalance   int64
	Bucket      hongbao.Bucket
	From, To    string
	Step        string
	RowsPlanned int64
	RowsCopied  int64
	Passes      int
	FreezeMS    int
	Error       string
	StartedAt   time.Time // zero until begun
	UpdatedAt   time.Time
	// LeaseUntil is the lease Stuck saw run out (zero elsewhere): the
	// mover's attempt a server finishes (RetryStuck).
	LeaseUntil time.Time
}

// Rebalance is one plan being applied, with its moves in bucket order.
type Rebalance struct {
	ID        int64
	Kind      string // apply, drain, reverse, move
	State     string
	Reverses  int64 // the rebalance a reverse undoes
	Note      string
	CreatedAt time.Time
	UpdatedAt time.Time
	Moves     []Move
}

// Journal is the record of rebalances in the meta database.
type Journal struct {
	db  *sql.DB
	now func() time.Time
}

// NewJournal returns the journal in meta, creating its tables if needed.
func NewJournal(ctx context.Context, meta *sql.DB, now func() time.Time) (*Journal, error) {
	if err := schema.EnsureMeta(ctx, meta); err != nil {
		return nil, err
	}
	return &Journal{db: meta, now: now}, nil
}

// Create records a new running rebalance of moves.
func (j *Journal) Create(ctx context.Context, kind string, reverses int64, note string, moves []Move) (*Rebalance, error) {
	now := j.now().UTC()
	var r *Rebalance
	err := sqldb.InTx(ctx, j.db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "INSERT INTO rebalances (kind, state, reverses, created_at, updated_at, note) VALUES (?,?,?,?,?,?)",
			kind, Running, reverses, now, now, note)
		if err != nil {
			return err
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		r = &Rebalance{ID: id, Kind: kind, State: Running, Reverses: reverses, Note: note, CreatedAt: now, UpdatedAt: now}
		for _, m := range moves {
			m.Rebalance, m.Step, m.UpdatedAt = id, Planned, now
			if _, err := tx.ExecContext(ctx, `INSERT INTO moves (rebalance_id, bucket, from_set, to_set, step, rows_planned, updated_at, error)
				VALUES (?,?,?,?,?,?,?,'')`, id, int(m.Bucket), m.From, m.To, Planned, m.RowsPlanned, now); err != nil {
				return err
			}
			r.Moves = append(r.Moves, m)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("topology: journal create: %w", err)
	}
	return r, nil
}

// Unfinished returns the newest running rebalance, or nil.
func (j *Journal) Unfinished(ctx context.Context) (*Rebalance, error) {
	return j.find(ctx, "WHERE state = '"+Running+"' ORDER BY id DESC LIMIT 1")
}

// Latest returns the newest rebalance, or nil.
func (j *Journal) Latest(ctx context.Context) (*Rebalance, error) {
	return j.find(ctx, "ORDER BY id DESC LIMIT 1")
}

// LatestDone returns the newest finished rebalance, or nil.
func (j *Journal) LatestDone(ctx context.Context) (*Rebalance, error) {
	return j.find(ctx, "WHERE state = '"+Finished+"' ORDER BY id DESC LIMIT 1")
}

func (j *Journal) find(ctx context.Context, where string) (*Rebalance, error) {
	r := &Rebalance{}
	err := j.db.QueryRowContext(ctx, "SELECT id, kind, state, reverses, note, created_at, updated_at FROM rebalances "+where).
		Scan(&r.ID, &r.Kind, &r.State, &r.Reverses, &r.Note, &r.CreatedAt, &r.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("topology: journal: %w", err)
	}
	rows, err := j.db.QueryContext(ctx, `SELECT bucket, from_set, to_set, step, rows_planned, rows_copied, passes, freeze_ms, error,
		started_at, updated_at FROM moves WHERE rebalance_id = ? ORDER BY bucket`, r.ID)
	if err != nil {
		return nil, fmt.Errorf("topology: journal moves: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		m := Move{Rebalance: r.ID}
		var b int
		var started sql.NullTime
		if err := rows.Scan(&b, &m.From, &m.To, &m.Step, &m.RowsPlanned, &m.RowsCopied, &m.Passes, &m.FreezeMS, &m.Error,
			&started, &m.UpdatedAt); err != nil {
			return nil, fmt.Errorf("topology: journal moves: %w", err)
		}
		m.Bucket, m.StartedAt = hongbao.Bucket(b), started.Time
		r.Moves = append(r.Moves, m)
	}
	return r, rows.Err()
}

// Record writes m's step, progress and error, and a lease: until it ends
// nobody else acts on the move (0: no lease).
func (j *Journal) Record(ctx context.Context, m *Move, lease time.Duration) error {
	now := j.now().UTC()
	m.UpdatedAt = now
	if m.StartedAt.IsZero() && m.Step != Planned {
		m.StartedAt = now
	}
	// The lease runs on the meta database's clock, as Stuck reads it: the
	// mover and the servers that judge its lease are on other hosts, and a
	// mover whose clock was minutes behind wrote leases that every server
	// saw as long gone (its live moves sent back, again and again).
	var micros any // NULL: no lease
	if lease > 0 {
		micros = lease.Microseconds()
	}
	_, err := j.db.ExecContext(ctx, `UPDATE moves SET step = ?, rows_copied = ?, passes = ?, freeze_ms = ?, error = ?,
		started_at = ?, updated_at = ?, lease_until = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND
		WHERE rebalance_id = ? AND bucket = ?`,
		m.Step, m.RowsCopied, m.Passes, m.FreezeMS, m.Error, nullTime(m.StartedAt), now, micros, m.Rebalance, int(m.Bucket))
	if err != nil {
		return fmt.Errorf("topology: journal bucket %d: %w", m.Bucket, err)
	}
	return nil
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// Finish sets a rebalance's final state.
func (j *Journal) Finish(ctx context.Context, id int64, state, note string) error {
	_, err := j.db.ExecContext(ctx, "UPDATE rebalances SET state = ?, note = IF(? = '', note, ?), updated_at = ? WHERE id = ?",
		state, note, note, j.now().UTC(), id)
	if err != nil {
		return fmt.Errorf("topology: journal finish %d: %w", id, err)
	}
	return nil
}

// Publish points m's bucket at m.To and records the step Published, in one
// transaction of the meta database, if the move is still Disowning (the
// mover and a server finishing for a dead mover may both try). It returns
// the new topology version (0 when someone else published it).
func (j *Journal) Publish(ctx context.Context, m *Move) (int64, error) {
	return j.PublishAll(ctx, []*Move{m})
}

// PublishAll is Publish of several moves in one transaction and one new
// version: movers publishing at once wait for one lock of the version row
// and one commit, and routers and servers reload the map once.
func (j *Journal) PublishAll(ctx context.Context, ms []*Move) (int64, error) {
	var version int64
	var done []*Move
	err := sqldb.InTx(ctx, j.db, func(tx *sql.Tx) error {
		version, done = 0, done[:0]
		var v int64
		if err := tx.QueryRowContext(ctx, "SELECT version FROM version WHERE id = 1 FOR UPDATE").Scan(&v); err != nil {
			return err
		}
		now := j.now().UTC()
		for _, m := range ms {
			res, err := tx.ExecContext(ctx, "UPDATE moves SET step = ?, updated_at = ?, lease_until = NULL WHERE rebalance_id = ? AND bucket = ? AND step = ?",
				Published, now, m.Rebalance, int(m.Bucket), Disowning)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue
			}
			if _, err := tx.ExecContext(ctx, "UPDATE buckets SET set_name = ? WHERE bucket = ?", m.To, int(m.Bucket)); err != nil {
				return err
			}
			done = append(done, m)
		}
		if len(done) == 0 {
			return nil
		}
		version = v + 1
		return bump(ctx, tx, v)
	})
	if err != nil {
		return 0, fmt.Errorf("topology: publish %d moves: %w", len(ms), err)
	}
	for _, m := range done {
		m.Step = Published
	}
	return version, nil
}

// Stuck returns the moves out of SET from that are Disowning with their
// lease run out by the meta database's clock (the one Record writes it
// with, whatever the hosts' clocks say): their mover died between giving
// the bucket up and publishing it. The source's servers finish them (Publish) when their
// fence no longer has the bucket, or send them back (Retry) when it does.
func (j *Journal) Stuck(ctx context.Context, from string) ([]Move, error) {
	rows, err := j.db.QueryContext(ctx, `SELECT rebalance_id, bucket, from_set, to_set, step, lease_until FROM moves
		WHERE step = ? AND from_set = ? AND lease_until < UTC_TIMESTAMP(3)`, Disowning, from)
	if err != nil {
		if sqldb.IsMissingTable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("topology: stuck moves: %w", err)
	}
	defer rows.Close()
	var out []Move
	for rows.Next() {
		var m Move
		var b int
		if err := rows.Scan(&m.Rebalance, &b, &m.From, &m.To, &m.Step, &m.LeaseUntil); err != nil {
			return nil, err
		}
		m.Bucket = hongbao.Bucket(b)
		out = append(out, m)
	}
	return out, rows.Err()
}

// Retry sends a Disowning move whose source kept the bucket back to
// CatchingUp, for the next apply.
func (j *Journal) Retry(ctx context.Context, m *Move) error {
	_, err := j.db.ExecContext(ctx, "UPDATE moves SET step = ?, lease_until = NULL, updated_at = ? WHERE rebalance_id = ? AND bucket = ? AND step = ?",
		CatchingUp, j.now().UTC(), m.Rebalance, int(m.Bucket), Disowning)
	if err != nil {
		return fmt.Errorf("topology: retry bucket %d: %w", m.Bucket, err)
	}
	return nil
}

// RetryStuck is Retry for a server finishing a dead mover's move m, as
// Stuck returned it: only while the move is still at the attempt whose
// lease Stuck saw run out. A mover that resumed the move meanwhile (its
// own Retry, a new freeze recording Disowning with a new lease) keeps it:
// sent back then, the new attempt's publish would find nothing to publish
// after the source gave the bucket up. It reports whether it sent m back.
func (j *Journal) RetryStuck(ctx context.Context, m *Move) (bool, error) {
	res, err := j.db.ExecContext(ctx, `UPDATE moves SET step = ?, lease_until = NULL, updated_at = ?
		WHERE rebalance_id = ? AND bucket = ? AND step = ? AND lease_until = ?`,
		CatchingUp, j.now().UTC(), m.Rebalance, int(m.Bucket), Disowning, m.LeaseUntil)
	if err != nil {
		return false, fmt.Errorf("topology: retry bucket %d: %w", m.Bucket, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("topology: retry bucket %d: %w", m.Bucket, err)
	}
	return n > 0, nil
}

// ErrBusy is returned by Lock when another apply holds the journal.
var ErrBusy = errors.New("topology: another rebalance apply is running")

// Lock makes the caller the journal's only writer of moves until release:
// a MySQL user lock on one connection, so a mover that dies (kill -9)
// drops it with its connection and another can continue its work.
func (j *Journal) Lock(ctx context.Context) (release func(), err error) {
	conn, err := j.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("topology: journal lock: %w", err)
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(CONCAT(DATABASE(), '.rebalance'), 0)").Scan(&got); err != nil {
		conn.Close()
		return nil, fmt.Errorf("topology: journal lock: %w", err)
	}
	if got.Int64 != 1 {
		conn.Close()
		return nil, ErrBusy
	}
	return func() {
		_, _ = conn.ExecContext(context.Background(), "SELECT RELEASE_LOCK(CONCAT(DATABASE(), '.rebalance'))")
		conn.Close()
	}, nil
}

// DisowningMoves returns the moves at step Disowning, by bucket: their source
// may have given the bucket up (its fence's commit) while the topology
// still names it, until the publish. A plain read of meta, no table
// created (none yet: no move).
func DisowningMoves(ctx context.Context, meta *sql.DB) (map[hongbao.Bucket]Move, error) {
	rows, err := meta.QueryContext(ctx, "SELECT rebalance_id, bucket, from_set, to_set, step FROM moves WHERE step = ?", Disowning)
	if sqldb.IsMissingTable(err) {
		return map[hongbao.Bucket]Move{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("topology: disowning moves: %w", err)
	}
	defer rows.Close()
	out := map[hongbao.Bucket]Move{}
	for rows.Next() {
		var m Move
		var b int
		if err := rows.Scan(&m.Rebalance, &b, &m.From, &m.To, &m.Step); err != nil {
			return nil, fmt.Errorf("topology: disowning moves: %w", err)
		}
		m.Bucket = hongbao.Bucket(b)
		out[m.Bucket] = m
	}
	return out, rows.Err()
}
