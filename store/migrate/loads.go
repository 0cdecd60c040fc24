package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// Usage is what a bucket holds in one SET's MySQL, from the table
// statistics (InnoDB's estimates: cheap to read for every bucket at once).
type Usage struct {
	Packets int64 // rows of its day tables
	Rows    int64 // rows of its day tables and their details
	Recent  int64 // rows of today's and yesterday's day tables
}

// Usages reads the usage of every bucket with day tables in db, in one
// query. The day of today is that of now in loc.
func Usages(ctx context.Context, db *sql.DB, loc *time.Location, now time.Time) (map[hongbao.Bucket]Usage, error) {
	rows, err := db.QueryContext(ctx, `SELECT table_schema, table_name, COALESCE(table_rows, 0) FROM information_schema.tables
		WHERE table_schema REGEXP '^db_[0-9]{2}$' AND table_name REGEXP '^t_[0-9]_[0-9]{2}(_detail)?$'`)
	if err != nil {
		return nil, fmt.Errorf("migrate: usage: %w", err)
	}
	defer rows.Close()
	today, yesterday := now.In(loc).Day(), now.In(loc).AddDate(0, 0, -1).Day()
	out := map[hongbao.Bucket]Usage{}
	for rows.Next() {
		var schemaName, name string
		var n int64
		if err := rows.Scan(&schemaName, &name, &n); err != nil {
			return nil, fmt.Errorf("migrate: usage: %w", err)
		}
		var xx, y, day int
		if _, err := fmt.Sscanf(schemaName+"."+name[:min(len(name), 6)], "db_%02d.t_%1d_%02d", &xx, &y, &day); err != nil {
			continue
		}
		b := hongbao.Bucket(xx*10 + y)
		u := out[b]
		u.Rows += n
		if len(name) == 6 { // t_y_dd: packets
			u.Packets += n
			if day == today || day == yesterday {
				u.Recent += n
			}
		}
		out[b] = u
	}
	return out, rows.Err()
}
