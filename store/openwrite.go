package store

import (
	"context"
	"database/sql"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// share is a new share of packet p.
type share struct {
	p   *hongbao.Packet
	rec hongbao.Record
}

// writeShares inserts the new shares and their credits and updates every
// packet that changed, as one compound statement (MariaDB's BEGIN NOT
// ATOMIC ... END): one round trip and one answer however many packets,
// where a multi-statement would flush an answer per statement. The block
// stops at the first statement that fails, and the error aborts the
// transaction. The credits are the outbox: written in the same
// transaction, so a committed share always has its credit.
func (s *Store) writeShares(ctx context.Context, tx *sql.Tx, fresh []share, now time.Time) error {
	var q strings.Builder
	q.WriteString("BEGIN NOT ATOMIC ")
	args := make([]any, 0, 11*len(fresh)+3)
	var order []*hongbao.Packet // packets in the order of their first share
	byPacket := map[*hongbao.Packet][]hongbao.Record{}
	for _, sh := range fresh {
		if byPacket[sh.p] == nil {
			order = append(order, sh.p)
		}
		byPacket[sh.p] = append(byPacket[sh.p], sh.rec)
	}
	for _, p := range order {
		recs := byPacket[p]
		q.WriteString("INSERT INTO " + s.Table(p.ID).Details() + " (packet_id, user_id, amount, seq, opened_at) VALUES (?,?,?,?,?)" +
			strings.Repeat(",(?,?,?,?,?)", len(recs)-1) + ";")
		for _, r := range recs {
			args = append(args, p.ID, r.User, r.Amount, r.Seq, r.At.UTC())
		}
	}
	q.WriteString("INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at) VALUES (?,?,?,?,?,?)" +
		strings.Repeat(",(?,?,?,?,?,?)", len(fresh)-1))
	for _, sh := range fresh {
		args = append(args, OpenKey(sh.p.ID, sh.rec.User), sh.rec.User, sh.rec.Amount, KindOpen, sh.p.ID, now.UTC())
	}
	for _, p := range order {
		q.WriteString(";UPDATE " + s.Table(p.ID).Packets() + " SET remaining_amount = ?, remaining_count = ? WHERE id = ?")
		args = append(args, p.RemainingAmount, p.RemainingCount, p.ID)
	}
	q.WriteString("; END")
	_, err := tx.ExecContext(ctx, q.String(), args...)
	return err
}

// openersOf fills the Openers of every batch whose work asked for them and
// whose packet this transaction left sold out, in one round trip. The read
// runs under the packets' row locks, after this transaction's own writes:
// it is every share the packet will ever have.
func (s *Store) openersOf(ctx context.Context, tx *sql.Tx, works []Work, bs []Batch) error {
	var q strings.Builder
	var args []any
	var asked []int
	for i, w := range works {
		p := bs[i].Packet
		if p == nil || p.RemainingCount > 0 || p.Count > w.OpenersUpTo {
			continue
		}
		if len(asked) > 0 {
			q.WriteString(";")
		}
		q.WriteString("SELECT user_id, amount FROM " + s.Table(w.ID).Details() + " WHERE packet_id = ?")
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
	for n, i := range asked {
		if n > 0 && !rows.NextResultSet() {
			return resultSetErr(rows)
		}
		openers := map[hongbao.UserID]int64{}
		for rows.Next() {
			var u hongbao.UserID
			var amount int64
			if err := rows.Scan(&u, &amount); err != nil {
				return err
			}
			openers[u] = amount
		}
		bs[i].Openers = openers
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
