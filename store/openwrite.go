package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
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
// had left before it, which packets it did not read (known) and of those
// which came without their openers (unlisted: have holds only this
// transaction's draws).
type writeSet struct {
	fresh    []share
	before   map[hongbao.PacketID]remaining
	known    map[hongbao.PacketID]bool
	unlisted map[hongbao.PacketID]bool
}

// Errors the write block signals (user-defined MySQL error numbers): a
// packet is not as the transaction believed, or the SET no longer owns a
// bucket of a packet it did not read. Either fails the transaction.
const (
	errPacketChanged = 30001
	errNotOwned      = 30002
)

// writeShares inserts the new shares and their credits (a packed outbox
// row per packet: outboxrows.go) and updates every packet that changed, as
// one compound statement (MariaDB's BEGIN NOT ATOMIC ... END): one round
// trip and one answer however many packets, where a multi-statement would
// flush an answer per statement. The block stops at the first statement
// that fails, and the error aborts the transaction. The credits are the
// outbox: written in the same transaction, so a committed share always has
// its credit, under the SET's (packed) name (its settler delivers them).
//
// The packets the transaction did not read are checked here instead: the
// SET's claim to their buckets is locked first, and every update is
// conditional on the packet having what it had before (a no-op check for
// the packets read under their row lock).
func (s *Store) writeShares(ctx context.Context, tx *sql.Tx, ws writeSet, now time.Time) error {
	var q strings.Builder
	args := make([]any, 0, 11*len(ws.fresh)+3)
	tables, byTable, byPacket := groupShares(s, ws.fresh)
	// The block's text is parsed on every call: one declared time, one SET
	// name (the outbox rows') and one count of the updated rows keep it
	// short.
	q.WriteString("BEGIN NOT ATOMIC DECLARE t DATETIME(3) DEFAULT ?; DECLARE s VARCHAR(64) DEFAULT ?; DECLARE n INT DEFAULT 0; " +
		"DECLARE w INT DEFAULT @@innodb_lock_wait_timeout;")
	args = append(args, now.UTC().Truncate(time.Millisecond), s.set) // the time as DATETIME(3) keeps it: MySQL may round finer times up
	args = s.fenceCheck(&q, args, byPacket, ws.known)
	for _, t := range tables { // a statement per table: MySQL's cost is mostly per statement
		q.WriteString("INSERT INTO " + t.Details() + "(packet_id,user_id,amount,seq,opened_at)VALUES")
		for i, p := range byTable[t] {
			for k, r := range byPacket[p] {
				if i > 0 || k > 0 {
					q.WriteString(",")
				}
				q.WriteString("(?,?,?,?,t)")
				args = append(args, p.ID, r.User, r.Amount, r.Seq)
			}
		}
		q.WriteString(";")
	}
	args = packCredits(&q, args, s.set, tables, byTable, byPacket)
	args = s.openEvents(&q, args, ws.fresh, byPacket, now)
	for _, t := range tables {
		args = updatePackets(&q, args, t, byTable[t], ws.before)
	}
	fmt.Fprintf(&q, "IF n<>%d THEN SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO=%d,MESSAGE_TEXT='packet changed';END IF;END", len(byPacket), errPacketChanged)
	_, err := tx.ExecContext(ctx, q.String(), args...)
	return err
}

// packCredits writes the outbox's INSERT of the credits of the new shares:
// a row per packet, packing its shares under the SET's packed name
// (outboxrows.go), in the order of the packets' updates.
func packCredits(q *strings.Builder, args []any, set string, tables []hongbao.DayTable, byTable map[hongbao.DayTable][]*hongbao.Packet,
	byPacket map[*hongbao.Packet][]hongbao.Record) []any {
	q.WriteString("INSERT INTO hb_set.outbox(entry_key,user_id,amount,kind,packet_id,created_at,set_name,n,shares)VALUES")
	var buf []byte
	name := set + packedSuffix
	for i, t := range tables {
		for k, p := range byTable[t] {
			if i > 0 || k > 0 {
				q.WriteString(",")
			}
			q.WriteString("(?,0,?,?,?,t,?,?,?)")
			recs := byPacket[p]
			var sum int64
			buf, sum = packShares(buf[:0], recs)
			args = append(args, packKey(p.ID, recs[0].User), sum, hongbao.KindOpen, p.ID, name, len(recs), string(buf))
		}
	}
	q.WriteString(";")
	return args
}

// groupShares sorts the packets of fresh by table, then ID (the order the
// updates lock them in, the same in every transaction), with each packet's
// new shares.
func groupShares(s *Store, fresh []share) ([]hongbao.DayTable, map[hongbao.DayTable][]*hongbao.Packet, map[*hongbao.Packet][]hongbao.Record) {
	byPacket := map[*hongbao.Packet][]hongbao.Record{}
	byTable := map[hongbao.DayTable][]*hongbao.Packet{}
	for _, sh := range fresh {
		if byPacket[sh.p] == nil {
			t := s.Table(sh.p.ID)
			byTable[t] = append(byTable[t], sh.p)
		}
		byPacket[sh.p] = append(byPacket[sh.p], sh.rec)
	}
	tables := slices.SortedFunc(maps.Keys(byTable), func(a, b hongbao.DayTable) int {
		return cmp.Or(cmp.Compare(a.Bucket, b.Bucket), cmp.Compare(a.Day, b.Day))
	})
	for _, ps := range byTable {
		slices.SortFunc(ps, func(a, b *hongbao.Packet) int { return cmp.Compare(a.ID, b.ID) })
	}
	return tables, byTable, byPacket
}

// updatePackets writes one UPDATE of the packets ps of table t, each to
// what it has now on condition it still has what it had before and takes
// opens (funded, not closed, not expired at the transaction's time t:
// MySQL's row, not the caller's knowledge, decides), and adds the rows it
// changed to n.
func updatePackets(q *strings.Builder, args []any, t hongbao.DayTable, ps []*hongbao.Packet, before map[hongbao.PacketID]remaining) []any {
	q.WriteString("UPDATE " + t.Packets() + " SET remaining_amount=CASE id")
	for _, p := range ps {
		q.WriteString(" WHEN ? THEN ?")
		args = append(args, p.ID, p.RemainingAmount)
	}
	q.WriteString(" END,remaining_count=CASE id")
	for _, p := range ps {
		q.WriteString(" WHEN ? THEN ?")
		args = append(args, p.ID, p.RemainingCount)
	}
	q.WriteString(" END WHERE id IN (" + sqldb.Placeholders(len(ps), "?") + ") AND closed=0 AND funding=1 AND expires_at>t AND (id,remaining_amount,remaining_count) IN (" +
		sqldb.Placeholders(len(ps), "(?,?,?)") + ");SET n=n+ROW_COUNT();")
	for _, p := range ps {
		args = append(args, p.ID)
	}
	for _, p := range ps {
		b := before[p.ID]
		args = append(args, p.ID, b.amount, b.count)
	}
	return args
}

// fenceCheck writes the lock and check of the SET's claim to the buckets
// of the known packets (the others' were locked by the read).
func (s *Store) fenceCheck(q *strings.Builder, args []any, ps map[*hongbao.Packet][]hongbao.Record, known map[hongbao.PacketID]bool) []any {
	var ids []hongbao.PacketID
	for p := range ps {
		if known[p.ID] {
			ids = append(ids, p.ID)
		}
	}
	if len(ids) == 0 {
		return args
	}
	buckets := bucketsOf(ids)
	fq, fargs := s.owned("COUNT(*)", buckets)
	// NOWAIT is not allowed in a compound statement: the session's lock
	// wait is 0 for the check alone, and set back however it ends (the
	// handler re-raises the lock wait or the not-owned signal).
	fq = strings.TrimSuffix(fq, " NOWAIT")
	fmt.Fprintf(q, "BEGIN DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN SET innodb_lock_wait_timeout = w; RESIGNAL; END; "+
		"SET innodb_lock_wait_timeout = 0; "+
		"IF (%s) <> %d THEN SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = %d, MESSAGE_TEXT = 'buckets not owned'; END IF; END; "+
		"SET innodb_lock_wait_timeout = w;", fq, len(buckets), errNotOwned)
	return append(args, fargs...)
}

// openersOf fills the Openers of every batch whose work asked for them and
// whose packet has at most that many shares (or sold out, at most that
// many for a sold-out packet). A known packet's are what was
// known plus this transaction's draws (have), unless it came unlisted
// (have is then only the draws); the others' are read, in one
// round trip, under the packets' row locks and after this transaction's
// own writes: every share the packet has.
func (s *Store) openersOf(ctx context.Context, tx *sql.Tx, works []Work, bs []Batch,
	have map[hongbao.PacketID]map[hongbao.UserID]int64, ws writeSet) error {
	var q strings.Builder
	var args []any
	var asked []int
	for i, w := range works {
		p := bs[i].Packet
		switch {
		case p == nil || p.Count > w.OpenersUpTo && (p.RemainingCount > 0 || p.Count > w.SoldOutOpenersUpTo):
			continue
		case ws.known[w.ID] && !ws.unlisted[w.ID]:
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
