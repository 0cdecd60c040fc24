package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Orphan is a packet that no settlement will ever reach: not settled, past
// its expiry by more than a grace, and without a mark that the settler
// scans for it. A funded packet that is neither closed nor sold out needs
// its expiry mark (hb_set.expiry) to be closed and its rest refunded; a
// pending one needs its pending mark (hb_set.pending) to be funded or
// cancelled by the sweeper, and its expiry mark afterwards.
type Orphan struct {
	Packet          hongbao.PacketID
	Table           string // its day table, db_xx.t_y_dd
	Sender          hongbao.UserID
	Funding         hongbao.Funding // Pending or Funded
	Total           int64
	Count           int
	RemainingAmount int64
	RemainingCount  int
	ExpiresAt       time.Time
	NoExpiry        bool // hb_set.expiry lacks it
	NoPending       bool // hb_set.pending lacks it (a pending packet)
}

// String describes the orphan for hbctl verify's report.
func (o Orphan) String() string {
	var what, lacks string
	switch {
	case o.Funding == hongbao.Pending && o.NoPending:
		what, lacks = "pending (debit undecided)", "no pending mark (hb_set.pending): the sweeper never funds or cancels it"
	case o.Funding == hongbao.Pending:
		what, lacks = "pending (debit undecided)", "no expiry mark (hb_set.expiry): once funded it is never closed"
	default:
		what, lacks = "funded, not closed", "no expiry mark (hb_set.expiry): the settler never closes it nor refunds the rest"
	}
	return fmt.Sprintf("orphan packet %d (bucket %d, %s) of sender %d: %s, %d fen left in %d of %d shares, expired %s, %s",
		o.Packet, o.Packet.Bucket(), o.Table, o.Sender, what, o.RemainingAmount, o.RemainingCount, o.Count,
		o.ExpiresAt.UTC().Format(time.RFC3339), lacks)
}

// orphanQuery selects the orphans of one day table expired before its one
// argument. Marks are written in the transaction that inserts the packet
// and deleted in the one that closes, cancels or funds it (or purges it,
// sold out), so in one consistent snapshot a packet that lacks a mark it
// needs has lost it, whatever is in flight.
const orphanQuery = `SELECT p.id, p.sender, p.funding, p.total, p.count, p.remaining_amount, p.remaining_count, p.expires_at,
	e.packet_id IS NULL, p.funding = 0 AND m.packet_id IS NULL
	FROM %s p LEFT JOIN hb_set.expiry e ON e.packet_id = p.id LEFT JOIN hb_set.pending m ON m.packet_id = p.id
	WHERE p.closed = 0 AND p.expires_at < ? AND (p.funding = 0 OR (p.funding = 1 AND p.remaining_count > 0))
	AND (e.packet_id IS NULL OR (p.funding = 0 AND m.packet_id IS NULL))
	ORDER BY p.id`

// Orphans lists, in the snapshot, the orphans of the live day tables of
// the buckets the snapshot counts whose expiry is before before (now less
// the settler's sweep delay: a packet younger than that is not reported,
// whatever its marks). Archive tables hold no orphan: the archiver only
// moves days whose packets are all settled.
func (s *Snapshot) Orphans(ctx context.Context, before time.Time) ([]Orphan, error) {
	tables, err := listTables(ctx, s.conn, dayTablePattern)
	if err != nil {
		return nil, fmt.Errorf("store: orphans: %w", err)
	}
	var out []Orphan
	probed := false
	for _, t := range tables {
		if b, ok := tableBucket(t); s.owned != nil && (!ok || !s.owned[b]) {
			continue
		}
		if !probed { // a missing mark table would hide every orphan
			if err := probeMarks(ctx, s.conn); err != nil {
				return nil, fmt.Errorf("store: orphans: %w", err)
			}
			probed = true
		}
		found, err := orphansIn(ctx, s.conn, t, before)
		if isTableDefChanged(err) || sqldb.IsMissingTable(err) {
			continue // created after the snapshot began, or dropped: no rows in it
		}
		if err != nil {
			return nil, fmt.Errorf("store: orphans in %s: %w", t, err)
		}
		out = append(out, found...)
	}
	return out, nil
}

// probeMarks fails unless both mark tables can be read.
func probeMarks(ctx context.Context, q querier) error {
	for _, t := range []string{"hb_set.expiry", "hb_set.pending"} {
		rows, err := q.QueryContext(ctx, "SELECT packet_id FROM "+t+" LIMIT 0")
		if err != nil {
			return fmt.Errorf("the SET has day tables but %s cannot be read: %w", t, err)
		}
		rows.Close()
	}
	return nil
}

// orphansIn runs orphanQuery on day table t.
func orphansIn(ctx context.Context, q querier, t string, before time.Time) ([]Orphan, error) {
	rows, err := q.QueryContext(ctx, fmt.Sprintf(orphanQuery, t), before.UTC())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Orphan
	for rows.Next() {
		o := Orphan{Table: t}
		if err := rows.Scan(&o.Packet, &o.Sender, &o.Funding, &o.Total, &o.Count, &o.RemainingAmount, &o.RemainingCount,
			&o.ExpiresAt, &o.NoExpiry, &o.NoPending); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// Restored is what RestoreMarks did for one orphan.
type Restored struct {
	Packet  hongbao.PacketID
	Expiry  bool   // its expiry mark was written
	Pending bool   // its pending mark was written
	Skipped string // why nothing was written, "" when something was
}

// RestoreMarks writes back the marks the orphans lack, in one transaction,
// so that the SET's settler settles them as any other expired packet: the
// sweeper decides a pending one, then its close refunds the rest of a
// funded one to its sender, exactly once (the refund's ledger key). Each
// packet is checked again under its row lock and the SET's fence of its
// bucket, as Close does: one settled meanwhile, gone, or in a bucket the
// SET gave away since it was found is skipped, and a mark already there
// is kept, so running it again changes nothing.
func (s *Store) RestoreMarks(ctx context.Context, orphans []Orphan) ([]Restored, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: restore marks: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: nothing to undo
	out := make([]Restored, 0, len(orphans))
	for _, o := range orphans {
		r, err := restoreMarks(ctx, tx, s.set, s.Table(o.Packet), o.Packet)
		if err != nil {
			return nil, fmt.Errorf("store: restore marks of %s: %w", o.Packet, err)
		}
		out = append(out, r)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: restore marks: %w", err)
	}
	return out, nil
}

// restoreMarks writes the marks packet id of day table t lacks, in tx.
func restoreMarks(ctx context.Context, tx *sql.Tx, set string, t hongbao.DayTable, id hongbao.PacketID) (Restored, error) {
	r := Restored{Packet: id}
	err := fence.Lock(ctx, tx, set, id.Bucket())
	if errors.Is(err, hongbao.ErrWrongSet) {
		r.Skipped = "its bucket is no longer this SET's: verify again"
		return r, nil
	}
	if err != nil {
		return r, err
	}
	p, err := scanPacket(tx.QueryRowContext(ctx, selectPacket+t.Packets()+" WHERE id = ? FOR UPDATE", id))
	if errors.Is(err, hongbao.ErrNotFound) {
		r.Skipped = "no longer in its day table"
		return r, nil
	}
	if err != nil {
		return r, err
	}
	if p.Closed || p.Funding == hongbao.Cancelled || (p.Funding == hongbao.Funded && p.RemainingCount == 0) {
		r.Skipped = "settled meanwhile"
		return r, nil
	}
	if r.Expiry, err = insertMark(ctx, tx, "hb_set.expiry", "expires_at", id, p.ExpiresAt); err != nil {
		return r, err
	}
	if p.Funding == hongbao.Pending {
		if r.Pending, err = insertMark(ctx, tx, "hb_set.pending", "created_at", id, p.CreatedAt); err != nil {
			return r, err
		}
	}
	if !r.Expiry && !r.Pending {
		r.Skipped = "its marks are there"
	}
	return r, nil
}

// insertMark writes id's row in a mark table unless it has one, and says
// whether it wrote it.
func insertMark(ctx context.Context, tx *sql.Tx, table, col string, id hongbao.PacketID, at time.Time) (bool, error) {
	res, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (packet_id, "+col+") VALUES (?, ?) ON DUPLICATE KEY UPDATE packet_id = packet_id",
		id, at.UTC())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
