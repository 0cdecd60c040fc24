package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// span is a chunk: keys in [lo, hi); nil bounds are open.
type span struct{ lo, hi *int64 }

func (s span) where(key string) (string, []any) {
	var conds []string
	var args []any
	if s.lo != nil {
		conds = append(conds, key+" >= ?")
		args = append(args, *s.lo)
	}
	if s.hi != nil {
		conds = append(conds, key+" < ?")
		args = append(args, *s.hi)
	}
	if len(conds) == 0 {
		return "1=1", nil
	}
	return strings.Join(conds, " AND "), args
}

func (s span) String() string {
	f := func(p *int64, open string) string {
		if p == nil {
			return open
		}
		return fmt.Sprint(*p)
	}
	return "[" + f(s.lo, "-inf") + ", " + f(s.hi, "+inf") + ")"
}

// digest is what one chunk holds on one side.
type digest struct {
	rows  int64
	hash  uint64 // XOR of the rows' 64-bit hashes (CRC-32, CRC-32C and their product, over every column): order-free
	money int64  // the chunk's money column summed, for people to read
}

// money is the column whose sum a table's digest reports.
func money(t table) string {
	switch {
	case strings.HasSuffix(t.name, "_detail"):
		return "amount"
	case t.key == "id":
		return "remaining_amount"
	}
	return "0"
}

// columns returns the digest expression of t's rows, read once from
// information_schema of the side that has the table.
func (m *Bucket) columns(ctx context.Context, t table) (string, error) {
	m.mu.Lock()
	expr, ok := m.cols[t.name]
	m.mu.Unlock()
	if ok {
		return expr, nil
	}
	db, tbl, _ := strings.Cut(t.name, ".")
	var cols []string
	for _, s := range []Side{m.From, m.To} {
		rows, err := m.db(s, t).QueryContext(ctx, "SELECT column_name, is_nullable = 'YES' FROM information_schema.columns WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position", db, tbl)
		if err != nil {
			return "", fmt.Errorf("migrate: columns of %s: %w", t.name, err)
		}
		for rows.Next() {
			var c string
			var nullable bool
			if err := rows.Scan(&c, &nullable); err != nil {
				rows.Close()
				return "", err
			}
			cols = append(cols, "`"+c+"`")
			if nullable {
				// CONCAT_WS skips NULLs: (NULL, 'x') and ('x', NULL)
				// would read the same without the flag.
				cols = append(cols, "ISNULL(`"+c+"`)")
			}
		}
		rows.Close()
		if len(cols) > 0 {
			break
		}
	}
	if len(cols) == 0 {
		return "", errNoTable // on neither side (yet): empty
	}
	// 64 bits per row from two checksums the CPU computes in hardware
	// (MD5's hex string and its conversion cost several times more, and
	// the digests are computed under the freeze), made non-linear by
	// their product. A CRC alone is affine: the change of a row's hash is
	// a function of the change of its bytes and their distance from the
	// end, whatever the rest of the row. Two sends of one chunk funded
	// between two passes (funding, the last column, 0 -> 1 in both) then
	// changed their rows' CRCs by the same bits, and the chunk's XOR did
	// not change at all: the funding was never copied, and the moved
	// packets stayed pending on the new owner, their sends answered
	// (BenchmarkRebalance found them). With the product the change of a
	// row's hash depends on the row's content, so such changes do not
	// cancel. 32 x 32 bits fit in BIGINT UNSIGNED.
	row := "CONCAT_WS('#'," + strings.Join(cols, ",") + ")"
	a, b := "CRC32("+row+")", "CRC32C("+row+")"
	expr = "(((" + a + " << 32) | " + b + ") ^ (" + a + " * " + b + "))"
	m.mu.Lock()
	if m.cols == nil {
		m.cols = map[string]string{}
	}
	m.cols[t.name] = expr
	m.mu.Unlock()
	return expr, nil
}

// errNoTable is a table on neither side, e.g. a shared table of a
// database no send has made yet: it holds nothing.
var errNoTable = errors.New("migrate: no such table on either side")

// querier is a pool or a transaction of one side.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// digestOf digests chunk s of t in db; a missing table is empty.
func (m *Bucket) digestOf(ctx context.Context, db querier, t table, s span) (digest, error) {
	expr, err := m.columns(ctx, t)
	if errors.Is(err, errNoTable) {
		return digest{}, nil
	}
	if err != nil {
		return digest{}, err
	}
	where, args := s.where(t.key)
	var d digest
	err = db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(BIT_XOR("+expr+"),0), COALESCE(SUM("+money(t)+"),0) FROM "+
		t.name+" WHERE "+where+t.filter(m.B), args...).Scan(&d.rows, &d.hash, &d.money)
	if sqldb.IsMissingTable(err) {
		return digest{}, nil
	}
	if err != nil {
		return digest{}, fmt.Errorf("migrate: digest %s %s: %w", t.name, s, err)
	}
	return d, nil
}

// spans cuts t into chunks of about Chunk rows by the source's keys; the
// first and last are open, so rows only the target has are covered too.
func (m *Bucket) spans(ctx context.Context, t table) ([]span, error) {
	rows, err := m.db(m.From, t).QueryContext(ctx, "SELECT "+t.key+" FROM "+t.name+" WHERE 1=1"+t.filter(m.B)+" ORDER BY "+t.key)
	if sqldb.IsMissingTable(err) {
		return []span{{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("migrate: keys of %s: %w", t.name, err)
	}
	defer rows.Close()
	var bounds []int64
	n := 0
	for rows.Next() {
		var k int64
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		if n > 0 && n%m.chunk() == 0 && (len(bounds) == 0 || bounds[len(bounds)-1] != k) {
			bounds = append(bounds, k)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("migrate: keys of %s: %w", t.name, err)
	}
	out := make([]span, 0, len(bounds)+1)
	var lo *int64
	for i := range bounds {
		hi := &bounds[i]
		out = append(out, span{lo: lo, hi: hi})
		lo = hi
	}
	return append(out, span{lo: lo}), nil
}

// digestsOf digests every chunk of t in db in one scan: MariaDB's
// INTERVAL(key, bounds...) numbers a row's chunk as spans numbers them.
// A missing table is empty.
func (m *Bucket) digestsOf(ctx context.Context, db *sql.DB, t table, spans []span) ([]digest, error) {
	expr, err := m.columns(ctx, t)
	if errors.Is(err, errNoTable) {
		return make([]digest, len(spans)), nil
	}
	if err != nil {
		return nil, err
	}
	chunk := "0"
	var args []any
	if len(spans) > 1 {
		chunk = "INTERVAL(" + t.key + strings.Repeat(",?", len(spans)-1) + ")"
		for _, s := range spans[1:] {
			args = append(args, *s.lo)
		}
	}
	out := make([]digest, len(spans))
	rows, err := db.QueryContext(ctx, "SELECT "+chunk+" c, COUNT(*), COALESCE(BIT_XOR("+expr+"),0), COALESCE(SUM("+money(t)+"),0) FROM "+
		t.name+" WHERE 1=1"+t.filter(m.B)+" GROUP BY c", args...)
	if sqldb.IsMissingTable(err) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("migrate: digest %s: %w", t.name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var d digest
		if err := rows.Scan(&i, &d.rows, &d.hash, &d.money); err != nil {
			return nil, fmt.Errorf("migrate: digest %s: %w", t.name, err)
		}
		if i < 0 || i >= len(out) {
			return nil, fmt.Errorf("migrate: digest %s: chunk %d of %d", t.name, i, len(out))
		}
		out[i] = d
	}
	return out, rows.Err()
}
