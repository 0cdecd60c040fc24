package sqldb

import (
	"context"
	"database/sql"
	"net"
)

// OpenDial is Open with its own dial function for every connection of the
// pool (nil: the driver's): a caller that must reach servers through
// something else than the network's default path (a test cutting one
// server off from this process alone) sets it, never the environment.
func OpenDial(dsn string, maxConns int, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*sql.DB, error) {
	c, err := connectorDial(dsn, dial)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	tune(db, maxConns)
	return db, nil
}
