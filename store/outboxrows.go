package store

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// The outbox holds two shapes of rows (schema.SetStatements):
//   - one entry: a refund, or anything written before credits were packed
//     (shares NULL, n 1);
//   - the credits of one packet's opens in one transaction, packed
//     (writeShares): kind open, user_id 0, amount their sum, n their
//     count, shares "user:amount,user:amount,...". Each credit keeps its
//     own ledger key (hongbao.OpenKey); the row's entry_key only names it
//     for an operator. Its set_name is the SET's with packedSuffix: a
//     settler from before packing reads its SET's rows by name, so it
//     leaves these alone (their credits wait for a settler that unpacks
//     them) instead of crediting a packed row's sum to user 0; every
//     reader here asks for both names (ownNames).
//
// Packing is what makes the outbox cheap: a row per credit cost each open
// an insert and a delete of a row and its index entries on the SET's
// primary and again on its replica; packed, an open costs the pair about a
// third less (BenchmarkCommitCost: 94 us against 138, its transaction and
// its settlement). Every reader unpacks the
// rows into entries (outboxRow.entries), so what the settler, the audits
// and verify see is an entry per credit either way.

// packedSuffix makes a SET's name the set_name of its packed rows: no SET
// name has a "/" (set/topology), so none is another SET's.
const packedSuffix = "/packed"

// ownRows is the condition on set_name of the outbox rows of a SET:
// its own, packed or not, and those written before rows named their SET;
// ownNames are its arguments.
const ownRows = "set_name IN (?, ?, '')"

func ownNames(set string) []any { return []any{set, set + packedSuffix} }

// outboxCols are the columns outboxRow scans, in its order.
const outboxCols = "id, entry_key, user_id, amount, kind, packet_id, created_at, n, shares"

// outboxRow is one row of hb_set.outbox as read.
type outboxRow struct {
	id     int64
	entry  hongbao.Entry
	n      int
	shares sql.NullString
}

func (r *outboxRow) scan(rows *sql.Rows) error {
	e := &r.entry
	return rows.Scan(&r.id, &e.Key, &e.User, &e.Amount, &e.Kind, &e.Packet, &e.At, &r.n, &r.shares)
}

// entries are the row's entries: itself, or the credits it packs. A packed
// row that does not unpack to its own count, sum and kind is an error
// naming it.
func (r *outboxRow) entries() ([]hongbao.Entry, error) {
	if !r.shares.Valid {
		return []hongbao.Entry{r.entry}, nil
	}
	es, err := unpackShares(r.entry.Packet, r.entry.At, r.shares.String)
	var sum int64
	for _, e := range es {
		sum += e.Amount
	}
	if err == nil && (r.entry.Kind != hongbao.KindOpen || sum != r.entry.Amount || len(es) != r.n) {
		err = fmt.Errorf("packs %d credits of %d fen, the row says %d of %d fen, kind %s", len(es), sum, r.n, r.entry.Amount, r.entry.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox row %d: %w", r.id, err)
	}
	return es, nil
}

// packKey is a packed row's entry_key: the packet and its first opener's
// ledger key, for an operator reading the table (no reader uses it).
func packKey(p hongbao.PacketID, first hongbao.UserID) string {
	return "opens:" + p.String() + ":" + first.String()
}

// packShares appends the records' credits as a packed row's shares and
// returns it with their sum.
func packShares(b []byte, recs []hongbao.Record) ([]byte, int64) {
	var sum int64
	for i, r := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(r.User), 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, r.Amount, 10)
		sum += r.Amount
	}
	return b, sum
}

// unpackShares reads a packed row's shares: the credits of packet p's
// openers, written at at.
func unpackShares(p hongbao.PacketID, at time.Time, shares string) ([]hongbao.Entry, error) {
	if shares == "" {
		return nil, fmt.Errorf("no shares packed")
	}
	es := make([]hongbao.Entry, 0, strings.Count(shares, ",")+1)
	for pair := range strings.SplitSeq(shares, ",") {
		u, a, ok := strings.Cut(pair, ":")
		user, err1 := strconv.ParseInt(u, 10, 64)
		amount, err2 := strconv.ParseInt(a, 10, 64)
		if !ok || err1 != nil || err2 != nil || user <= 0 || amount <= 0 {
			return nil, fmt.Errorf("malformed packed share %q", pair)
		}
		uid := hongbao.UserID(user)
		es = append(es, hongbao.Entry{Key: hongbao.OpenKey(p, uid), User: uid, Amount: amount, Kind: hongbao.KindOpen, Packet: p, At: at})
	}
	return es, nil
}
