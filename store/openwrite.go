package store

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// share is a new share of packet p.
type share struct {
	p   *hongbao.Packet
	rec hongbao.Record
}

// remaining is a packet's money and shares left.
type remaining struct {
	amount int64
	count  int
}

// writeSet is what a transaction writes: the new shares, what each packet
// had left before it and which packets it did not read (known).
type writeSet struct {
	fresh  []share
	before map[hongbao.PacketID]remaining
	known  map[hongbao.PacketID]bool
}

// Errors the write block signals (user-defined MySQL error numbers): a
// packet is not as the transaction believed, or the SET no longer owns a
// bucket of a packet it did not read. Either fails the transaction.
const (
	errPacketChanged = 30001
	errNotOwned      = 30002
)

// writeShares inserts the new shares and their credits and updates every
// packet that changed, as one compound statement (MariaDB's BEGIN NOT
// ATOMIC ... END): one round trip and one answer however many packets,
// where a multi-statement would flush an answer per statement. The block
// stops at the first statement that fails, and the error aborts the
// transaction. The credits are the outbox: written in the same
// transaction, so a committed share always has its credit.
//
// The packets the transaction did not read are checked here instead: the
// SET's claim to their buckets is locked first, and every update is
// conditional on the packet having what it had before (a no-op check for
// the packets read under their row lock).
func (s *Store) writeShares(ctx context.Context, tx *sql.Tx, ws writeSet, now time.Time) error {
	var q strings.Builder
	args := make([]any, 0, 11*len(ws.fresh)+3)
	var order []*hongbao.Packet // packets in the order of their first share
	byPacket := map[*hongbao.Packet][]hongbao.Record{}
	for _, sh := range ws.fresh {
		if byPacket[sh.p] == nil {
			order = append(order, sh.p)
		}
		byPacket[sh.p] = append(byPacket[sh.p], sh.rec)
	}
	// The block's text is parsed on every call: one declared time and one
	// count of the updated rows keep it short.
	q.WriteString("BEGIN NOT ATOMIC DECLARE t DATETIME(3) DEFAULT ?; DECLARE n INT DEFAULT 0;")
	args = append(args, now.UTC())
	args = s.fenceCheck(&q, args, order, ws.known)
	for _, p := range order {
		recs := byPacket[p]
		q.WriteString("INSERT INTO " + s.Table(p.ID).Details() + "(packet_id,user_id,amount,seq,opened_at)VALUES(?,?,?,?,t)" +
			strings.Repeat(",(?,?,?,?,t)", len(recs)-1) + ";")
		for _, r := range recs {
			args = append(args, p.ID, r.User, r.Amount, r.Seq)
		}
	}
	q.WriteString("INSERT INTO hb_set.outbox(entry_key,user_id,amount,kind,packet_id,created_at)VALUES(?,?,?,?,?,t)" +
		strings.Repeat(",(?,?,?,?,?,t)", len(ws.fresh)-1) + ";")
	for _, sh := range ws.fresh {
		args = append(args, OpenKey(sh.p.ID, sh.rec.User), sh.rec.User, sh.rec.Amount, KindOpen, sh.p.ID)
	}
	for _, p := range order {
		b := ws.before[p.ID]
		q.WriteString("UPDATE " + s.Table(p.ID).Packets() + " SET remaining_amount=?,remaining_count=?" +
			" WHERE id=? AND remaining_amount=? AND remaining_count=? AND closed=0;SET n=n+ROW_COUNT();")
		args = append(args, p.RemainingAmount, p.RemainingCount, p.ID, b.amount, b.count)
	}
	fmt.Fprintf(&q, "IF n<>%d THEN SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO=%d,MESSAGE_TEXT='packet changed';END IF;END", len(order), errPacketChanged)
	_, err := tx.ExecContext(ctx, q.String(), args...)
	return err
}

// fenceCheck writes the lock and check of the SET's claim to the buckets
// of the known packets (the others' were locked by the read).
func (s *Store) fenceCheck(q *strings.Builder, args []any, ps []*hongbao.Packet, known map[hongbao.PacketID]bool) []any {
	seen := map[hongbao.Bucket]bool{}
	for _, p := range ps {
		if known[p.ID] && !seen[p.ID.Bucket()] {
			seen[p.ID.Bucket()] = true
		}
	}
	if len(seen) == 0 {
		return args
	}
	args = append(args, s.set)
	for b := range seen {
		args = append(args, int(b))
	}
	q.WriteString("IF (SELECT COUNT(*) FROM hb_fence.owned WHERE set_name = ? AND bucket IN (?" + strings.Repeat(",?", len(seen)-1) +
		fmt.Sprintf(") LOCK IN SHARE MODE) <> %d THEN SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = %d, MESSAGE_TEXT = 'buckets not owned'; END IF;", len(seen), errNotOwned))
	return args
}

// openersOf fills the Openers of every batch whose work asked for them and
// whose packet has at most that many shares (or sold out, at most that
// many for a sold-out packet). A known packet's are what was
// known plus this transaction's draws (have); the others' are read, in one
// round trip, under the packets' row locks and after this transaction's
// own writes: every share the packet has.
func (s *Store) openersOf(ctx context.Context, tx *sql.Tx, works []Work, bs []Batch,
	have map[hongbao.PacketID]map[hongbao.UserID]int64, known map[hongbao.PacketID]bool) error {
	var q strings.Builder
	var args []any
	var asked []int
	for i, w := range works {
		p := bs[i].Packet
		switch {
		case p == nil || p.Count > w.OpenersUpTo && (p.RemainingCount > 0 || p.Count > w.SoldOutOpenersUpTo):
			continue
		case known[w.ID]:
			bs[i].Openers = maps.Clone(have[w.ID])
			continue
		}
		if len(asked) > 0 {
			q.WriteString(" UNION ALL ")
		}
		q.WriteString("(SELECT packet_id, user_id, amount FROM " + s.Table(w.ID).Details() + " WHERE packet_id = ?)")
		args = append(args, w.ID)
		asked = append(asked, i)
	}
	if len(asked) == 0 {
		return nil
	}
	rows, err := tx.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	read := map[hongbao.PacketID]map[hongbao.UserID]int64{}
	for _, i := range asked {
		read[works[i].ID] = map[hongbao.UserID]int64{}
	}
	for rows.Next() {
		var id hongbao.PacketID
		var u hongbao.UserID
		var amount int64
		if err := rows.Scan(&id, &u, &amount); err != nil {
			return err
		}
		read[id][u] = amount
	}
	for _, i := range asked {
		bs[i].Openers = read[works[i].ID]
	}
	return rows.Err()
}

func fill(n int, err error) []hongbao.Outcome {
	out := make([]hongbao.Outcome, n)
	for i := range out {
		out[i].Err = err
	}
	return out
}
