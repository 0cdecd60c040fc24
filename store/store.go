// Package store is the SET's MySQL adapter: it creates packets, runs the open
// transaction, settles, verifies, archives and moves the day tables of one
// SET, turning driver errors into the domain errors of package hongbao.
package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Store reads and writes the packets of one SET's MySQL.
type Store struct {
	db   *sql.DB
	cold *sql.DB // archive; nil when reads never follow archived days
	// replica serves detail reads while fresh says it is close enough
	// behind the primary; nil: the primary serves them.
	replica    *sql.DB
	fresh      func() bool
	set        string
	loc        *time.Location
	now        func() time.Time
	intn       func(n int64) int64
	tables     *schema.Ensurer
	coldTables *schema.Ensurer // the archive's audience tables; nil without an archive
	obs        *metrics.Store  // retries and fence refusals of the open transactions; nil: none
	// owned decides which buckets of the fence the settler and the
	// archiver act on; nil: the fence alone (no topology to ask).
	ownership Ownership
	events    bool // write webhook events (WithEvents)
}

// New returns the Store of SET set on db. loc is the cluster's time zone
// (it picks the day table), now the clock (read once per transaction) and
// intn the source of the random draws: a uniform value in [0, n).
// Writes commit only for buckets the SET owns in db's fence (fence.Own).
func New(db *sql.DB, set string, loc *time.Location, now func() time.Time, intn func(n int64) int64) *Store {
	return &Store{db: db, set: set, loc: loc, now: now, intn: intn, tables: schema.NewEnsurer(db)}
}

// WithMetrics makes the open transactions count their retries and the
// fence's refusals in m.
func (s *Store) WithMetrics(m *metrics.Store) *Store {
	s.obs = m
	return s
}

// WithOwnership makes the settler's and the archiver's reads (Due, Days,
// Owns) act only on the buckets o trusts, of those the fence holds.
func (s *Store) WithOwnership(o Ownership) *Store {
	s.ownership = o
	return s
}

// WithArchive makes reads of packets no longer in the day tables look in
// the archive (cold) database, so archived packets stay readable.
func (s *Store) WithArchive(cold *sql.DB) *Store {
	s.cold, s.coldTables = cold, schema.NewEnsurer(cold)
	return s
}

// WithReplica makes detail reads (Detail) use replica, a read-only copy
// of the SET's MySQL, while fresh reports it replicating close behind.
// The open path never reads it: what a share is worth is decided on the
// primary only.
func (s *Store) WithReplica(replica *sql.DB, fresh func() bool) *Store {
	s.replica, s.fresh = replica, fresh
	return s
}

// DB returns the pool, for health checks.
func (s *Store) DB() *sql.DB { return s.db }

// Table returns the day table of id in the store's time zone.
func (s *Store) Table(id hongbao.PacketID) hongbao.DayTable { return id.Table(s.loc) }

// NewPacket is a packet to create.
type NewPacket struct {
	ID             hongbao.PacketID
	Sender         hongbao.UserID
	Req            hongbao.SendRequest
	Expiry         time.Duration
	IdempotencyKey string // empty: none
	// Funding is Pending when the sender's debit is still to be made
	// (then Fund settles it), Funded when no wallet is involved.
	Funding hongbao.Funding
}

// hash identifies the request behind an idempotency key, so a key reused
// for a different packet is refused instead of answered with the first one.
func (n NewPacket) hash() []byte {
	req := fmt.Appendf(nil, "%d|%d|%d|%s|%s", n.Sender, n.Req.Total, n.Req.Count, n.Req.Type, n.Req.Greeting)
	if n.Req.Audience != nil {
		// Only then: the keys of sends without an audience, stored
		// before audiences existed, keep their hashes.
		req = fmt.Appendf(req, "|%s", n.Req.Audience)
	}
	h := sha256.Sum256(req)
	return h[:]
}

// Create inserts a packet. With an idempotency key already used by the same
// sender for the same request it returns the first packet and created=false.
func (s *Store) Create(ctx context.Context, n NewPacket) (p *hongbao.Packet, created bool, err error) {
	t := s.Table(n.ID)
	if err := s.tables.Ensure(ctx, t); err != nil {
		return nil, false, err
	}
	if err := s.tables.EnsureSet(ctx); err != nil {
		return nil, false, err
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	var existing hongbao.PacketID
	err = sqldb.InTx(ctx, s.db, func(tx *sql.Tx) error {
		existing = 0
		if err := fence.Lock(ctx, tx, s.set, n.ID.Bucket()); err != nil {
			return err
		}
		if n.IdempotencyKey != "" {
			id, err := claimKey(ctx, tx, t, n, now)
			if err != nil || id != 0 {
				existing = id
				return err
			}
		}
		if err := insertPacket(ctx, tx, t, n, now); err != nil || n.Funding != hongbao.Funded {
			return err
		}
		return s.insertEvents(ctx, tx, now, sentEvent(n.packet()))
	})
	switch {
	case sqldb.IsDupEntry(err):
		return s.replay(ctx, n)
	case err != nil:
		return nil, false, fmt.Errorf("store: create %s: %w", n.ID, err)
	case existing != 0:
		p, _, err := s.Packet(ctx, existing)
		return p, false, err
	}
	p, _, err = s.Packet(ctx, n.ID)
	return p, true, err
}

// replay answers a create whose ID is taken. When the packet under that ID
// is this very request (a router retrying a send whose answer it lost), the
// send is answered again; otherwise another minter produced the same ID and
// the caller mints anew.
func (s *Store) replay(ctx context.Context, n NewPacket) (*hongbao.Packet, bool, error) {
	p, err := s.Head(ctx, n.ID)
	if err != nil {
		return nil, false, err
	}
	if p.Sender != n.Sender || p.Total != n.Req.Total || p.Count != n.Req.Count || p.Type != n.Req.Type || p.Greeting != n.Req.Greeting ||
		p.Audience.String() != n.Req.Audience.String() {
		return nil, false, fmt.Errorf("store: create %s: %w", n.ID, hongbao.ErrDuplicateID)
	}
	return p, false, nil
}

// claimKey records the idempotency key for n, or returns the packet an
// earlier request with the key created. It inserts first: a concurrent
// send with the same key then waits on the key's row and sees the winner,
// where a locking read of a missing row would take gap locks that deadlock.
func claimKey(ctx context.Context, tx *sql.Tx, t hongbao.DayTable, n NewPacket, now time.Time) (hongbao.PacketID, error) {
	_, err := tx.ExecContext(ctx, "INSERT INTO "+t.DB()+".t_idem (sender, idem_key, packet_id, req_hash, created_at) VALUES (?, ?, ?, ?, ?)",
		n.Sender, n.IdempotencyKey, n.ID, n.hash(), now)
	if !sqldb.IsDupEntry(err) {
		return 0, err
	}
	var id hongbao.PacketID
	var h []byte
	err = tx.QueryRowContext(ctx, "SELECT packet_id, req_hash FROM "+t.DB()+".t_idem WHERE sender = ? AND idem_key = ? LOCK IN SHARE MODE",
		n.Sender, n.IdempotencyKey).Scan(&id, &h)
	switch {
	case err != nil:
		return 0, err
	case !bytes.Equal(h, n.hash()):
		return 0, hongbao.ErrIdempotencyReuse
	}
	return id, nil
}

// insertPacket writes the packet, its expiry (for the settler's close) and,
// unless already funded, its pending mark (for the sweeper).
func insertPacket(ctx context.Context, tx *sql.Tx, t hongbao.DayTable, n NewPacket, now time.Time) error {
	expires := n.ID.Time().Add(n.Expiry).UTC()
	_, err := tx.ExecContext(ctx, "INSERT INTO "+t.Packets()+
		" (id, sender, type, total, count, greeting, remaining_amount, remaining_count, created_at, expires_at, funding) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
		n.ID, n.Sender, string(n.Req.Type), n.Req.Total, n.Req.Count, n.Req.Greeting, n.Req.Total, n.Req.Count,
		n.ID.Time().UTC(), expires, n.Funding)
	if err != nil {
		return err
	}
	if n.Req.Audience != nil {
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+t.DB()+".t_audience (packet_id, users) VALUES (?,?)", n.ID, n.Req.Audience.String()); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO hb_set.expiry (packet_id, expires_at) VALUES (?,?)", n.ID, expires); err != nil {
		return err
	}
	if n.Funding == hongbao.Pending {
		_, err = tx.ExecContext(ctx, "INSERT INTO hb_set.pending (packet_id, created_at) VALUES (?,?)", n.ID, now)
	}
	return err
}

// Packet reads a packet and its records in opening order on the primary,
// from one snapshot (an archive run cannot slip between the two reads). A
// packet not in its day table is looked for in the archive. Detail is the
// read a client's GET makes, which may be served by the replica.
func (s *Store) Packet(ctx context.Context, id hongbao.PacketID) (*hongbao.Packet, []hongbao.Record, error) {
	t := s.Table(id)
	err := s.audienced(ctx, s.tables, t.DB())
	var p *hongbao.Packet
	var recs []hongbao.Record
	if err == nil {
		p, recs, err = readPacket(ctx, s.db, t.DB(), t.Packets(), t.Details(), id)
	}
	if errors.Is(err, hongbao.ErrNotFound) && s.cold != nil {
		// The ID names its day, so an archived packet is one lookup away.
		a := dayOf(t, id, s.loc).Archive()
		if err = s.audienced(ctx, s.coldTables, a.DB()); err == nil {
			p, recs, err = readPacket(ctx, s.cold, a.DB(), a.Packets(), a.Details(), id)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("store: packet %s: %w", id, err)
	}
	return p, recs, nil
}

// audienced makes sure database db has its audience table before a read
// that carries the audience: without it the read would fail as if the
// packet were missing. A missing database is left to the read (its
// packet is missing).
func (s *Store) audienced(ctx context.Context, e *schema.Ensurer, db string) error {
	if err := e.EnsureAudience(ctx, db); err != nil && !sqldb.IsMissingTable(err) {
		return err
	}
	return nil
}

func readPacket(ctx context.Context, db *sql.DB, dbName, packets, details string, id hongbao.PacketID) (*hongbao.Packet, []hongbao.Record, error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback() //nolint:errcheck // read-only: nothing to keep
	p, err := scanAudienced(tx.QueryRowContext(ctx, selectAudienced(dbName, packets)+" WHERE id = ?", id))
	if err != nil {
		return nil, nil, err
	}
	rows, err := tx.QueryContext(ctx, "SELECT user_id, amount, opened_at, seq FROM "+details+" WHERE packet_id = ? ORDER BY seq", id)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var recs []hongbao.Record
	for rows.Next() {
		var r hongbao.Record
		if err := rows.Scan(&r.User, &r.Amount, &r.At, &r.Seq); err != nil {
			return nil, nil, err
		}
		recs = append(recs, r)
	}
	return p, recs, rows.Err()
}

// Opened returns the share user took of id, if any: a point read on the
// detail's primary key, for when the cache cannot tell. A packet no longer
// in its day table is looked for in the archive, whatever its age (a
// packet with a short expiry can be archived within the day it was sent:
// retention 1 just after midnight, or an --as-of ahead), so an earlier
// opener of an archived packet still gets their share back. The same
// statement tells whether the packet is still in its day table, so the
// crowd of a live packet pays no second read.
func (s *Store) Opened(ctx context.Context, id hongbao.PacketID, user hongbao.UserID) (int64, bool, error) {
	t := s.Table(id)
	amount, ok, live, err := openedLive(ctx, s.db, t, id, user)
	if err == nil && !ok && !live && s.cold != nil {
		amount, ok, err = openedIn(ctx, s.cold, dayOf(t, id, s.loc).Archive().Details(), id, user)
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: opened %s by %s: %w", id, user, err)
	}
	return amount, ok, nil
}

// openedLive reads user's share of id in its day table, and whether the
// packet is there at all (a missing day table: it is not).
func openedLive(ctx context.Context, db *sql.DB, t hongbao.DayTable, id hongbao.PacketID, user hongbao.UserID) (amount int64, ok, live bool, err error) {
	var a sql.NullInt64
	err = db.QueryRowContext(ctx, "SELECT (SELECT amount FROM "+t.Details()+" WHERE packet_id = ? AND user_id = ?), EXISTS (SELECT 1 FROM "+
		t.Packets()+" WHERE id = ?)", id, user, id).Scan(&a, &live)
	switch {
	case sqldb.IsMissingTable(err):
		return 0, false, false, nil
	case err != nil:
		return 0, false, false, err
	}
	return a.Int64, a.Valid, live, nil
}

// openedIn reads user's share of id in the details table, if any.
func openedIn(ctx context.Context, db *sql.DB, details string, id hongbao.PacketID, user hongbao.UserID) (int64, bool, error) {
	var amount int64
	err := db.QueryRowContext(ctx, "SELECT amount FROM "+details+" WHERE packet_id = ? AND user_id = ?", id, user).Scan(&amount)
	switch {
	case errors.Is(err, sql.ErrNoRows), sqldb.IsMissingTable(err):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	return amount, true, nil
}

const selectPacket = "SELECT id, sender, type, total, count, greeting, remaining_amount, remaining_count, created_at, expires_at, closed, funding FROM "

// selectAudienced reads what selectPacket does and the packet's audience
// (NULL: none) from database db's audience table: the reads that decide
// who may open (the open transaction, grab's, detail's) scan it with
// scanAudienced.
func selectAudienced(db, packets string) string {
	return "SELECT id, sender, type, total, count, greeting, remaining_amount, remaining_count, created_at, expires_at, closed, funding, " +
		"(SELECT users FROM " + db + ".t_audience WHERE packet_id = " + packets + ".id) FROM " + packets
}

// scanner is a *sql.Row or a *sql.Rows positioned on a row.
type scanner interface{ Scan(dest ...any) error }

func scanPacket(row scanner) (*hongbao.Packet, error) { return scanPacketAs(row, false) }

// scanAudienced reads a row of selectAudienced.
func scanAudienced(row scanner) (*hongbao.Packet, error) { return scanPacketAs(row, true) }

func scanPacketAs(row scanner, audienced bool) (*hongbao.Packet, error) {
	var p hongbao.Packet
	var typ string
	var aud sql.NullString
	dest := []any{&p.ID, &p.Sender, &typ, &p.Total, &p.Count, &p.Greeting, &p.RemainingAmount, &p.RemainingCount,
		&p.CreatedAt, &p.ExpiresAt, &p.Closed, &p.Funding}
	if audienced {
		dest = append(dest, &aud)
	}
	err := row.Scan(dest...)
	switch {
	case errors.Is(err, sql.ErrNoRows), sqldb.IsMissingTable(err):
		return nil, hongbao.ErrNotFound
	case err != nil:
		return nil, err
	}
	p.Type = hongbao.Type(typ)
	if aud.Valid {
		if p.Audience, err = hongbao.ParseAudience(aud.String); err != nil {
			return nil, fmt.Errorf("packet %s: %w", p.ID, err)
		}
	}
	return &p, nil
}

// Head reads a packet without its records, on the primary. A packet not in
// its day table is looked for in the archive, as Packet does: a grab of an
// archived packet whose state the cache lost must find it (not finding it,
// the server's not-found check did, and answered 503 busy for good).
func (s *Store) Head(ctx context.Context, id hongbao.PacketID) (*hongbao.Packet, error) {
	t := s.Table(id)
	if err := s.audienced(ctx, s.tables, t.DB()); err != nil {
		return nil, fmt.Errorf("store: packet %s: %w", id, err)
	}
	p, err := scanAudienced(s.db.QueryRowContext(ctx, selectAudienced(t.DB(), t.Packets())+" WHERE id = ?", id))
	if errors.Is(err, hongbao.ErrNotFound) && s.cold != nil {
		a := dayOf(t, id, s.loc).Archive()
		if err = s.audienced(ctx, s.coldTables, a.DB()); err == nil {
			p, err = scanAudienced(s.cold.QueryRowContext(ctx, selectAudienced(a.DB(), a.Packets())+" WHERE id = ?", id))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("store: packet %s: %w", id, err)
	}
	return p, nil
}
