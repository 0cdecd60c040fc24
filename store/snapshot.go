package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Snapshot is one SET's share of its MySQL as it was at one moment: every
// day table of the buckets its fence holds (every table without a SET
// name), their shares and the SET's outbox, read in one consistent-read
// transaction that stays open so that ledger entries can be matched against
// that same moment (Sources). It is what `hbctl verify` checks on a live
// system: money moving between the SET and the wallet during the check is
// in the snapshot, in the ledger, or in both, and the keys say which.
//
// The archive tables (cold) are read beside it, not in it: an archive run
// during the check can count a day twice or not at all.
type Snapshot struct {
	Totals  SetTotals // its sums; PendingPaid is left to the caller (Pending)
	Bad     []string  // violations of invariants 1 and 2
	Pending []Pending // its pending packets, whose debit may be in the ledger
	Outbox  []Owed    // its outbox rows

	conn  *sql.Conn
	db    *sql.DB
	cold  *sql.DB                 // the archive, read beside the snapshot (Count's)
	loc   *time.Location          // the cluster's time zone: day tables
	set   string                  // "": every table
	owned map[hongbao.Bucket]bool // the fence, then what Count counts; nil: every bucket
}

// Pending is a packet not yet funded: its debit may or may not be in the
// ledger.
type Pending struct {
	Packet hongbao.PacketID
	Total  int64
}

// Owed is an outbox row: a credit or refund not yet delivered, or being
// delivered.
type Owed struct {
	ID     int64 // the row's id in hb_set.outbox
	Key    string
	Kind   string
	Amount int64
}

// OpenSnapshot reads SET set's share of db (set "": all of it) and its
// archive (cold) and keeps the snapshot open; Close ends it. loc is the
// cluster's time zone (a packet's day table).
func OpenSnapshot(ctx context.Context, db, cold *sql.DB, set string, loc *time.Location) (*Snapshot, error) {
	s, err := BeginSnapshot(ctx, db, set, loc)
	if err != nil {
		return nil, err
	}
	if err := s.Count(ctx, cold, s.owned); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// BeginSnapshot opens the consistent snapshot of SET set in db and reads
// only its fence in it (Fence), so that a caller opening several SETs'
// snapshots can open them all within milliseconds and then choose, for
// every bucket, the one snapshot that counts it (Count). On error the
// snapshot is closed.
func BeginSnapshot(ctx context.Context, db *sql.DB, set string, loc *time.Location) (*Snapshot, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	s := &Snapshot{conn: conn, db: db, loc: loc, set: set}
	if err := s.begin(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("store: snapshot: %w", err)
	}
	return s, nil
}

func (s *Snapshot) begin(ctx context.Context) error {
	// REPEATABLE READ for this transaction only: the session's level stays.
	if _, err := s.conn.ExecContext(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		return err
	}
	if _, err := s.conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
		return err
	}
	if s.set == "" {
		return nil
	}
	var err error
	s.owned, err = ownedIn(ctx, s.conn, s.set)
	return err
}

// Fence returns the buckets the SET's fence held in the snapshot (nil for
// a snapshot of every table, set ""). The caller must not change it.
func (s *Snapshot) Fence() map[hongbao.Bucket]bool { return s.owned }

// Count reads the snapshot's totals, violations, pending packets and
// outbox, counting the packets of buckets only (nil: every bucket); from
// then on Sources and SourcesNow see those buckets only. buckets should
// be buckets the snapshot's fence holds (Fence): a SET's copy of a bucket
// its fence does not hold may be stale.
func (s *Snapshot) Count(ctx context.Context, cold *sql.DB, buckets map[hongbao.Bucket]bool) error {
	s.owned, s.cold = buckets, cold
	if err := s.read(ctx, cold); err != nil {
		return fmt.Errorf("store: snapshot: %w", err)
	}
	return nil
}

func (s *Snapshot) read(ctx context.Context, cold *sql.DB) error {
	where, args := "TRUE", []any(nil)
	if s.set != "" {
		where, args = ownRows, ownNames(s.set)
	}
	// Pending packets are listed: whether their debit counts depends on
	// the ledger the caller reads after the snapshot.
	pending := func(id, total int64) (bool, error) {
		s.Pending = append(s.Pending, Pending{Packet: hongbao.PacketID(id), Total: total})
		return false, nil
	}
	var err error
	s.Totals, s.Bad, err = verifyTables(ctx, s.conn, cold, s.owned, pending)
	if err != nil {
		return err
	}
	rows, err := s.conn.QueryContext(ctx, "SELECT "+outboxCols+" FROM hb_set.outbox WHERE "+where, args...)
	if sqldb.IsMissingTable(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r outboxRow
		if err := r.scan(rows); err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
		es, err := r.entries()
		if err != nil { // counted as the row says, and named
			s.Bad = append(s.Bad, err.Error())
			es = []hongbao.Entry{r.entry}
		}
		for _, e := range es {
			s.owe(Owed{ID: r.id, Key: e.Key, Kind: e.Kind, Amount: e.Amount})
		}
	}
	return rows.Err()
}

// owe adds an outbox entry to the snapshot.
func (s *Snapshot) owe(o Owed) {
	s.Outbox = append(s.Outbox, o)
	switch o.Kind {
	case hongbao.KindOpen:
		s.Totals.OutboxOpen += o.Amount
		s.Totals.OutboxOpenN++
	case hongbao.KindRefund:
		s.Totals.OutboxRef += o.Amount
	}
}

// Sources reports which of the ledger entry keys have their source in the
// snapshot: the packet of a send (any funding state), the share of an open,
// the closed packet of a refund. Keys of packets whose bucket the snapshot
// does not count, and keys of other kinds, are never in it.
func (s *Snapshot) Sources(ctx context.Context, keys []string) (map[string]bool, error) {
	return sources(ctx, s.conn, s.loc, s.owned, keys)
}

// SourcesNow is Sources against the SET's MySQL as it is now, outside the
// snapshot and in every bucket's tables: where an entry written after the
// snapshot must find its source. Every bucket, not the snapshot's: the
// bucket may have moved since (its rows are then on the target, and on
// the source until its grace ends), and any copy of the source shows that
// it exists; callers ask every SET.
func (s *Snapshot) SourcesNow(ctx context.Context, keys []string) (map[string]bool, error) {
	return sources(ctx, s.db, s.loc, nil, keys)
}

// Close ends the snapshot's transaction and gives its connection back.
func (s *Snapshot) Close() error {
	_, err := s.conn.ExecContext(context.Background(), "ROLLBACK")
	return errors.Join(err, s.conn.Close())
}

// ledgerKey is a ledger entry key taken apart.
type ledgerKey struct {
	kind   string
	packet hongbao.PacketID
	user   hongbao.UserID
}

// parseKey parses send:<p>, refund:<p> and open:<p>:<u>.
func parseKey(key string) (ledgerKey, bool) {
	parts := strings.Split(key, ":")
	var k ledgerKey
	if len(parts) < 2 {
		return k, false
	}
	p, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || p <= 0 {
		return k, false
	}
	k.kind, k.packet = parts[0], hongbao.PacketID(p)
	switch {
	case k.kind == hongbao.KindOpen && len(parts) == 3:
		u, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			return k, false
		}
		k.user = hongbao.UserID(u)
	case (k.kind == hongbao.KindSend || k.kind == hongbao.KindRefund) && len(parts) == 2:
	default:
		return k, false
	}
	return k, true
}

// sources looks the keys' sources up through q, by day table, in batches.
func sources(ctx context.Context, q querier, loc *time.Location, owned map[hongbao.Bucket]bool, keys []string) (map[string]bool, error) {
	type group struct {
		table hongbao.DayTable
		keys  []ledgerKey
	}
	groups := map[hongbao.DayTable]*group{}
	var order []hongbao.DayTable
	for _, key := range keys {
		k, ok := parseKey(key)
		if !ok || (owned != nil && !owned[k.packet.Bucket()]) {
			continue
		}
		t := k.packet.Table(loc)
		if groups[t] == nil {
			groups[t] = &group{table: t}
			order = append(order, t)
		}
		groups[t].keys = append(groups[t].keys, k)
	}
	found := map[string]bool{}
	for _, t := range order {
		ks := groups[t].keys
		for len(ks) > 0 {
			n := min(len(ks), 500)
			if err := sourcesIn(ctx, q, t, ks[:n], found); err != nil {
				return nil, fmt.Errorf("store: sources in %s: %w", t.Packets(), err)
			}
			ks = ks[n:]
		}
	}
	return found, nil
}

// sourcesIn marks in found the keys of ks (all of day table t) whose
// source the table holds.
func sourcesIn(ctx context.Context, q querier, t hongbao.DayTable, ks []ledgerKey, found map[string]bool) error {
	var ids []any
	var pairs []any
	for _, k := range ks {
		if k.kind == hongbao.KindOpen {
			pairs = append(pairs, int64(k.packet), int64(k.user))
		} else {
			ids = append(ids, int64(k.packet))
		}
	}
	if len(ids) > 0 {
		rows, err := q.QueryContext(ctx, "SELECT id, closed FROM "+t.Packets()+" WHERE id IN ("+sqldb.Placeholders(len(ids), "?")+")", ids...)
		if err := tolerate(err); err != nil {
			return err
		}
		if rows != nil {
			defer rows.Close()
			for rows.Next() {
				var id int64
				var closed int
				if err := rows.Scan(&id, &closed); err != nil {
					return err
				}
				p := hongbao.PacketID(id)
				found[hongbao.SendKey(p)] = true
				if closed != 0 {
					found[hongbao.RefundKey(p)] = true
				}
			}
			if err := tolerate(rows.Err()); err != nil {
				return err
			}
		}
	}
	if len(pairs) > 0 {
		rows, err := q.QueryContext(ctx, "SELECT packet_id, user_id FROM "+t.Details()+" WHERE (packet_id, user_id) IN ("+
			sqldb.Placeholders(len(pairs)/2, "(?,?)")+")", pairs...)
		if err := tolerate(err); err != nil {
			return err
		}
		if rows != nil {
			defer rows.Close()
			for rows.Next() {
				var p, u int64
				if err := rows.Scan(&p, &u); err != nil {
					return err
				}
				found[hongbao.OpenKey(hongbao.PacketID(p), hongbao.UserID(u))] = true
			}
			return tolerate(rows.Err())
		}
	}
	return nil
}

// tolerate is nil for the errors of a table missing from a snapshot or a
// MySQL (nothing in it is a source).
func tolerate(err error) error {
	if err == nil || sqldb.IsMissingTable(err) || isTableDefChanged(err) {
		return nil
	}
	return err
}

// ownedIn is ownedBuckets through q.
func ownedIn(ctx context.Context, q querier, set string) (map[hongbao.Bucket]bool, error) {
	rows, err := q.QueryContext(ctx, "SELECT bucket FROM hb_fence.owned WHERE set_name = ?", set)
	if sqldb.IsMissingTable(err) {
		return map[hongbao.Bucket]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("buckets of SET %s: %w", set, err)
	}
	defer rows.Close()
	owned := map[hongbao.Bucket]bool{}
	for rows.Next() {
		var b int
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		owned[hongbao.Bucket(b)] = true
	}
	return owned, rows.Err()
}

// isTableDefChanged reports MySQL's error 1412: a table created after the
// consistent snapshot reading it began (it was not there: empty).
func isTableDefChanged(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1412
}
