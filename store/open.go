package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Open opens packet id for user in one transaction.
func (s *Store) Open(ctx context.Context, id hongbao.PacketID, user hongbao.UserID) (hongbao.OpenResult, error) {
	b, err := s.OpenBatch(ctx, id, []hongbao.UserID{user})
	if err != nil {
		return hongbao.OpenResult{}, err
	}
	return b.Outcomes[0].Result, b.Outcomes[0].Err
}

// Work is the opens of one packet, applied in order.
type Work struct {
	ID    hongbao.PacketID
	Users []hongbao.UserID
	// OpenersUpTo asks for every opener of the packet, as the transaction
	// leaves it, when it has at most this many shares (0: never): with
	// them the caller can answer repeated opens, and the packet's next
	// transaction, without reading. SoldOutOpenersUpTo asks the same of a
	// packet the transaction leaves sold out, which never changes again.
	OpenersUpTo, SoldOutOpenersUpTo int
	// Known, when set, is what the caller learnt of the packet from its
	// last transaction; the transaction then skips reading the packet.
	Known *hongbao.Snapshot
}

// Batch is the result of one Work: one outcome per user, the packet as the
// transaction left it (nil when it does not exist) and, when asked for and
// the packet is small enough, every share it has.
type Batch struct {
	Outcomes []hongbao.Outcome
	Packet   *hongbao.Packet
	Openers  map[hongbao.UserID]int64
}

// OpenBatch applies the opens of users to packet id, in order, in one
// transaction: lock the packet row, find who already has a share, draw a
// share for each newcomer while any are left and the packet lives, insert
// the details and update the packet. The outcomes are exactly those of
// opening one at a time in the same order (a user twice in the batch gets
// one share and then already_opened). A non-nil error means nothing was
// committed, or, for an error from COMMIT, that the outcome is unknown; the
// opens are idempotent, so the caller may retry them.
func (s *Store) OpenBatch(ctx context.Context, id hongbao.PacketID, users []hongbao.UserID) (Batch, error) {
	bs, err := s.OpenMany(ctx, []Work{{ID: id, Users: users}})
	if err != nil {
		return Batch{}, err
	}
	return bs[0], nil
}

// OpenMany applies the works of several packets in one transaction, as
// OpenBatch does for one: the outcomes are those of applying the works one
// after the other in the order given. Packet rows are locked in ID order,
// so two transactions sharing packets wait for each other instead of
// deadlocking. The transaction costs four round trips whatever the number
// of packets (begin; fence, locks and shares read; writes; commit), plus one
// when openers are asked for a packet not known; when every packet is
// known, three (begin; writes; commit). Known packets are locked by the
// writes instead, in table then ID order: transactions of one server never
// share a packet, and a deadlock between servers is retried.
func (s *Store) OpenMany(ctx context.Context, works []Work) ([]Batch, error) {
	if len(works) == 0 {
		return nil, nil
	}
	bs, err := s.openMany(ctx, works)
	if err != nil && ctx.Err() == nil && !errors.Is(err, hongbao.ErrMoving) && slices.ContainsFunc(works, func(w Work) bool { return w.Known != nil }) {
		// Possibly stale knowledge: the opens are idempotent, so apply
		// them again from what MySQL holds.
		s.obs.Stale()
		bs, err = s.openMany(ctx, unknown(works))
	}
	if err != nil {
		if errors.Is(err, hongbao.ErrWrongSet) {
			s.obs.Fence()
		}
		return nil, fmt.Errorf("store: open %s (+%d packets): %w", works[0].ID, len(works)-1, err)
	}
	return bs, nil
}

func (s *Store) openMany(ctx context.Context, works []Work) ([]Batch, error) {
	for _, w := range works { // DDL commits: never inside the transaction
		if err := s.audienced(ctx, s.tables, s.Table(w.ID).DB()); err != nil {
			return nil, err
		}
	}
	var bs []Batch
	err := sqldb.InTxRetrying(ctx, s.db, s.obs.Deadlock, func(tx *sql.Tx) error {
		now := s.now() // fixed for the whole transaction
		var err error
		bs, err = s.openTx(ctx, tx, works, now)
		if sqldb.IsLockWait(err) {
			// The only lock an open does not wait for is a bucket's
			// fence (NOWAIT, see owned): a move froze it. Not retried
			// here: the queue waits it out without holding a
			// committer, so other buckets' opens go on.
			return fmt.Errorf("%v: %w", err, hongbao.ErrMoving)
		}
		return err
	})
	return bs, err
}

// unknown returns works without their knowledge.
func unknown(works []Work) []Work {
	out := slices.Clone(works)
	for i := range out {
		out[i].Known = nil
	}
	return out
}

func (s *Store) openTx(ctx context.Context, tx *sql.Tx, works []Work, now time.Time) ([]Batch, error) {
	usable := func(w Work) bool { return w.Known.Usable(now) }
	var toRead []Work
	for _, w := range works {
		if !usable(w) {
			toRead = append(toRead, w)
		}
	}
	rd, gone, err := s.readPresent(ctx, tx, toRead)
	if err != nil {
		return nil, err
	}
	ws := writeSet{before: map[hongbao.PacketID]remaining{}, known: map[hongbao.PacketID]bool{}, unlisted: map[hongbao.PacketID]bool{}}
	for _, w := range works {
		if usable(w) && rd.packets[w.ID] == nil && !ws.known[w.ID] {
			p, have := w.Known.Packet, maps.Clone(w.Known.Openers)
			if have == nil {
				have = map[hongbao.UserID]int64{}
			}
			rd.packets[w.ID], rd.have[w.ID], ws.known[w.ID] = &p, have, true
			ws.unlisted[w.ID] = w.Known.Unlisted
		}
		if p := rd.packets[w.ID]; p != nil {
			ws.before[w.ID] = remaining{p.RemainingAmount, p.RemainingCount}
		}
	}
	bs := make([]Batch, len(works))
	for i, w := range works {
		p := rd.packets[w.ID]
		if p == nil || gone[w.ID] {
			bs[i] = Batch{Outcomes: fill(len(w.Users), hongbao.ErrNotFound)}
			continue
		}
		var recs []hongbao.Record
		bs[i].Outcomes, recs = hongbao.DrawOpens(p, rd.have[w.ID], w.Users, now, s.intn)
		for _, r := range recs {
			ws.fresh = append(ws.fresh, share{p: p, rec: r})
		}
		snap := *p
		bs[i].Packet = &snap
	}
	if len(ws.fresh) > 0 {
		if err := s.writeShares(ctx, tx, ws, now); err != nil {
			return nil, err
		}
	}
	return bs, s.openersOf(ctx, tx, works, bs, rd.have, ws)
}

// openRead is what a transaction read before deciding: the funded packets
// (locked) and the shares the works' users already hold.
type openRead struct {
	packets map[hongbao.PacketID]*hongbao.Packet
	have    map[hongbao.PacketID]map[hongbao.UserID]int64
}

// readForOpen takes, in one round trip, a shared lock on the SET's claim to
// every bucket involved, the row lock of every packet (in ID order) and
// then reads the users' existing shares: the shares are a consistent read
// made after every lock is held, so they include every committed open.
//
// The locks and the shares are one UNION ALL each, so MySQL answers with
// three result sets however many packets there are: it flushes every
// result set to the socket, and a statement per packet cost a send and a
// wake-up per packet on both sides (most of the database's CPU in the
// group scenario).
func (s *Store) readForOpen(ctx context.Context, tx *sql.Tx, works []Work) (openRead, error) {
	ids, users := packetsOf(works)
	buckets := bucketsOf(ids)
	var q strings.Builder
	fq, args := s.owned("bucket", buckets)
	q.WriteString(fq + ";")
	for i, id := range ids { // UNION ALL parts run in order: locks in ID order
		q.WriteString(unionPart(i) + "(" + selectPacket + s.Table(id).Packets() + " WHERE id = ? FOR UPDATE)")
		args = append(args, id)
	}
	q.WriteString(";")
	for i, id := range ids {
		us := users[id]
		in := "NULL" // a work without users reads nothing
		if len(us) > 0 {
			in = sqldb.Placeholders(len(us), "?")
		}
		q.WriteString(unionPart(i) + "(SELECT packet_id, user_id, amount FROM " + s.Table(id).Details() +
			" WHERE packet_id = ? AND user_id IN (" + in + "))")
		args = append(args, id)
		for _, u := range us {
			args = append(args, u)
		}
	}
	// The audiences, read as the shares are: after every lock is held. A
	// read of them inside the locking statement would be the transaction's
	// first consistent read, fixing its snapshot before the locks were
	// granted, and the shares read would miss opens committed meanwhile.
	q.WriteString(";")
	for i, id := range ids {
		q.WriteString(unionPart(i) + "(SELECT packet_id, users FROM " + s.Table(id).DB() + ".t_audience WHERE packet_id = ?)")
		args = append(args, id)
	}
	rows, err := tx.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return openRead{}, s.readErr(err)
	}
	defer rows.Close()
	rd, err := scanForOpen(rows, ids, len(buckets), s.set)
	if err != nil {
		return openRead{}, s.readErr(err)
	}
	return rd, nil
}

// owned is the fence every open transaction takes, as a statement
// selecting what: a shared lock on the SET's claim to each of buckets (at
// least one), which a bucket's move must wait for. It returns the
// statement and its arguments.
//
// NOWAIT: a claim being taken away by a move (its row deleted in the
// move's open transaction, or that delete waiting for the transactions
// already holding the lock) fails the statement at once (ErrMoving)
// instead of holding one transaction of many buckets, and the committer
// running it, for the whole freeze.
func (s *Store) owned(what string, buckets []hongbao.Bucket) (string, []any) {
	args := make([]any, 0, len(buckets)+1)
	args = append(args, s.set)
	for _, b := range buckets {
		args = append(args, int(b))
	}
	return "SELECT " + what + " FROM hb_fence.owned WHERE set_name = ? AND bucket IN (" +
		sqldb.Placeholders(len(buckets), "?") + ") LOCK IN SHARE MODE NOWAIT", args
}

// bucketsOf returns the distinct buckets of ids, in the order first seen.
func bucketsOf(ids []hongbao.PacketID) []hongbao.Bucket {
	var bs []hongbao.Bucket
	for _, id := range ids {
		if !slices.Contains(bs, id.Bucket()) {
			bs = append(bs, id.Bucket())
		}
	}
	// In order, so one set of packets always makes the same statement
	// (the known packets come from a map).
	slices.Sort(bs)
	return bs
}

func unionPart(i int) string {
	if i == 0 {
		return ""
	}
	return " UNION ALL "
}

// readPresent is readForOpen for the works whose day tables exist: a
// missing table (an ID made up, or of a day whose table is not created yet)
// means its packets do not exist, and must not fail the other packets of a
// merged transaction. A failed statement leaves the transaction open with
// the locks it took, so the rest is read again in the same transaction.
func (s *Store) readPresent(ctx context.Context, tx *sql.Tx, works []Work) (openRead, map[hongbao.PacketID]bool, error) {
	gone := map[hongbao.PacketID]bool{}
	for {
		var present []Work
		for _, w := range works {
			if !gone[w.ID] {
				present = append(present, w)
			}
		}
		if len(present) == 0 {
			return openRead{packets: map[hongbao.PacketID]*hongbao.Packet{}, have: map[hongbao.PacketID]map[hongbao.UserID]int64{}}, gone, nil
		}
		rd, err := s.readForOpen(ctx, tx, present)
		if !sqldb.IsMissingTable(err) {
			return rd, gone, err
		}
		n := len(gone)
		for _, w := range present {
			if t := s.Table(w.ID); strings.Contains(err.Error(), "'"+t.Packets()+"'") ||
				strings.Contains(err.Error(), "'"+t.Details()+"'") || strings.Contains(err.Error(), "'"+t.DB()+"'") {
				gone[w.ID] = true
			}
		}
		if len(gone) == n { // not a table of these packets: no progress to make
			return openRead{}, nil, err
		}
	}
}

// readErr turns a missing fence table into its meaning: the SET owns
// nothing in this MySQL.
func (s *Store) readErr(err error) error {
	if sqldb.IsMissingTable(err) && strings.Contains(err.Error(), "hb_fence") {
		return fmt.Errorf("fence of SET %s missing: %w", s.set, hongbao.ErrWrongSet)
	}
	return err
}

// scanForOpen reads the result sets of readForOpen in order: the fence,
// the packets, the shares, the audiences.
func scanForOpen(rows *sql.Rows, ids []hongbao.PacketID, buckets int, set string) (openRead, error) {
	owned := 0
	for rows.Next() {
		owned++
	}
	if err := rows.Err(); err != nil {
		return openRead{}, err
	}
	if owned != buckets {
		return openRead{}, fmt.Errorf("%d of %d buckets not owned by SET %s: %w", buckets-owned, buckets, set, hongbao.ErrWrongSet)
	}
	rd := openRead{packets: map[hongbao.PacketID]*hongbao.Packet{}, have: map[hongbao.PacketID]map[hongbao.UserID]int64{}}
	if !rows.NextResultSet() {
		return openRead{}, resultSetErr(rows)
	}
	for rows.Next() {
		p, err := scanPacket(rows)
		if err != nil {
			return openRead{}, err
		}
		if p.Funding == hongbao.Funded { // an unfunded packet is no packet to its openers
			rd.packets[p.ID] = p
		}
	}
	if err := rows.Err(); err != nil {
		return openRead{}, err
	}
	for _, id := range ids {
		rd.have[id] = map[hongbao.UserID]int64{}
	}
	if !rows.NextResultSet() {
		return openRead{}, resultSetErr(rows)
	}
	for rows.Next() {
		var id hongbao.PacketID
		var u hongbao.UserID
		var amount int64
		if err := rows.Scan(&id, &u, &amount); err != nil {
			return openRead{}, err
		}
		if rd.have[id] == nil {
			return openRead{}, fmt.Errorf("store: open read: share of packet %s not asked for", id)
		}
		rd.have[id][u] = amount
	}
	if err := rows.Err(); err != nil {
		return openRead{}, err
	}
	if !rows.NextResultSet() {
		return openRead{}, resultSetErr(rows)
	}
	return rd, scanAudiences(rows, rd.packets)
}

// scanAudiences reads the audiences result set of readForOpen into the
// packets read.
func scanAudiences(rows *sql.Rows, packets map[hongbao.PacketID]*hongbao.Packet) error {
	for rows.Next() {
		var id hongbao.PacketID
		var users string
		if err := rows.Scan(&id, &users); err != nil {
			return err
		}
		a, err := hongbao.ParseAudience(users)
		if err != nil {
			return fmt.Errorf("store: open read: packet %s: %w", id, err)
		}
		if p := packets[id]; p != nil {
			p.Audience = a
		}
	}
	return rows.Err()
}

func resultSetErr(rows *sql.Rows) error {
	if err := rows.Err(); err != nil {
		return err
	}
	return fmt.Errorf("store: open read: missing result set")
}

// packetsOf returns the works' distinct packets in ID order (the lock
// order) and each packet's distinct users.
func packetsOf(works []Work) ([]hongbao.PacketID, map[hongbao.PacketID][]hongbao.UserID) {
	users := map[hongbao.PacketID][]hongbao.UserID{}
	seen := map[hongbao.PacketID]map[hongbao.UserID]bool{}
	var ids []hongbao.PacketID
	for _, w := range works {
		if seen[w.ID] == nil {
			ids = append(ids, w.ID)
			seen[w.ID] = map[hongbao.UserID]bool{}
		}
		for _, u := range w.Users {
			if !seen[w.ID][u] {
				seen[w.ID][u] = true
				users[w.ID] = append(users[w.ID], u)
			}
		}
	}
	slices.Sort(ids)
	return ids, users
}
