package sqldb

import (
	"context"
	"database/sql"
)

// KindSum is the count and money of one kind of entry.
type KindSum struct {
	N   int
	Sum int64
}

// SumsByKind sums the amount column of table (the ledger or an outbox) by
// entry kind.
func SumsByKind(ctx context.Context, db *sql.DB, table string) (map[string]KindSum, error) {
	return SumsByKindWhere(ctx, db, table, "COUNT(*)", "TRUE")
}

// SumsByKindWhere is SumsByKind of the rows of table matching where (SQL
// after WHERE, with placeholders for args), counting entries by count (SQL:
// COUNT(*) where a row is an entry, SUM(n) for an outbox, whose packed
// rows hold n credits).
func SumsByKindWhere(ctx context.Context, db *sql.DB, table, count, where string, args ...any) (map[string]KindSum, error) {
	rows, err := db.QueryContext(ctx, "SELECT kind, COALESCE("+count+",0), COALESCE(SUM(amount),0) FROM "+table+" WHERE "+where+" GROUP BY kind", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]KindSum{}
	for rows.Next() {
		var kind string
		var k KindSum
		if err := rows.Scan(&kind, &k.N, &k.Sum); err != nil {
			return nil, err
		}
		out[kind] = k
	}
	return out, rows.Err()
}
