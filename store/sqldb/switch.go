package sqldb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/go-sql-driver/mysql"
)

// Switch is a pool that can be pointed at another MySQL server while in
// use: a SET's servers and settler follow their SET's primary through a
// failover without a restart. After To, new connections dial the new DSN;
// a connection to the old one is dropped as soon as database/sql looks at
// it (returned to the pool: driver.Validator; taken from it:
// driver.SessionResetter), and idle ones at once. A statement in flight on
// the old server fails: its network connection is closed (the old primary
// may be paused, and a read from it would wait forever); a commit that was
// under way has an unknown outcome, as when the fence kills it, and the
// caller retries (opens and sends are idempotent).
type Switch struct {
	db    *sql.DB
	conns int
	mu    sync.Mutex
	cur   atomic.Pointer[target]
	// onClose runs when the pool closes (OpenGroup's follower stops).
	onClose func()
}

// target is one DSN's connector and its generation, with the network
// connections it dialed that are still open.
type target struct {
	dsn  string
	gen  uint64
	conn driver.Connector

	mu     sync.Mutex
	closed bool
	nets   map[net.Conn]struct{}
}

// dial dials addr and keeps the connection until it is closed or the
// target is left.
func (t *target) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.Close()
		return nil, fmt.Errorf("schema: switch: %s was left for another server", addr)
	}
	tc := &trackedConn{Conn: c, t: t}
	t.nets[tc] = struct{}{}
	return tc, nil
}

// leave closes every network connection of t: statements in flight on
// them fail at once.
func (t *target) leave() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for c := range t.nets {
		c.(*trackedConn).Conn.Close()
	}
	clear(t.nets)
}

// trackedConn is a network connection of a target.
type trackedConn struct {
	net.Conn
	t *target
}

// NetConn is the connection c tracks (liveDial sets its keepalive).
func (c *trackedConn) NetConn() net.Conn { return c.Conn }

// SyscallConn is the tracked connection's: the driver checks an idle
// connection for its server's close before it reuses it (its connCheck)
// only on a syscall.Conn. Without it every Switch pool skipped the check,
// and after a MariaDB's restart each idle connection's next statement
// failed with invalid connection instead of a quiet reconnection.
func (c *trackedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("schema: switch: %T has no file descriptor", c.Conn)
	}
	return sc.SyscallConn()
}

func (c *trackedConn) Close() error {
	c.t.mu.Lock()
	delete(c.t.nets, c)
	c.t.mu.Unlock()
	return c.Conn.Close()
}

// OpenSwitch opens a switchable pool on dsn with Open's session settings.
func OpenSwitch(dsn string, maxConns int) (*Switch, error) {
	s := &Switch{conns: maxConns}
	if err := s.set(dsn); err != nil {
		return nil, err
	}
	s.db = sql.OpenDB(switchConnector{s})
	tune(s.db, maxConns)
	return s, nil
}

// DB is the pool.
func (s *Switch) DB() *sql.DB { return s.db }

// DSN is the DSN new connections dial.
func (s *Switch) DSN() string { return s.cur.Load().dsn }

// To points the pool at dsn (nothing when it already is). It reports
// whether it switched.
func (s *Switch) To(dsn string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.Load().dsn == dsn {
		return false, nil
	}
	old := s.cur.Load()
	if err := s.set(dsn); err != nil {
		return false, err
	}
	old.leave()
	// Close the idle connections now: they would be dropped when taken
	// anyway, but an idle connection to a fenced server is no use.
	s.db.SetMaxIdleConns(0)
	s.db.SetMaxIdleConns(s.conns)
	return true, nil
}

func (s *Switch) set(dsn string) error {
	t := &target{dsn: dsn, gen: 1, nets: map[net.Conn]struct{}{}}
	if old := s.cur.Load(); old != nil {
		t.gen = old.gen + 1
	}
	c, err := connectorDial(dsn, t.dial)
	if err != nil {
		return err
	}
	t.conn = c
	s.cur.Store(t)
	return nil
}

// switchConnector dials the Switch's current DSN.
type switchConnector struct{ s *Switch }

func (c switchConnector) Connect(ctx context.Context) (driver.Conn, error) {
	t := c.s.cur.Load()
	conn, err := t.conn.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return wrapConn(conn, c.s, t.gen)
}

func (c switchConnector) Driver() driver.Driver { return mysql.MySQLDriver{} }

// Close is called by the pool's Close (database/sql closes a connector
// that is an io.Closer).
func (c switchConnector) Close() error {
	if c.s.onClose != nil {
		c.s.onClose()
	}
	return nil
}

// mysqlConn is every interface the go-sql-driver connection implements
// that database/sql uses: context methods (one round trip with
// InterpolateParams, multi-statements through ExecerContext), transactions
// with options, pings, session resets, validation and its conversion of
// arguments (NamedValueChecker).
type mysqlConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

// switchConn is a connection of one generation of a Switch.
type switchConn struct {
	mysqlConn
	s   *Switch
	gen uint64
}

func wrapConn(c driver.Conn, s *Switch, gen uint64) (driver.Conn, error) {
	mc, ok := c.(mysqlConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("schema: switch: the driver's connection (%T) lacks an interface hongbao relies on", c)
	}
	return &switchConn{mysqlConn: mc, s: s, gen: gen}, nil
}

// current reports whether the connection dials the Switch's DSN.
func (c *switchConn) current() bool { return c.s.cur.Load().gen == c.gen }

// IsValid is false once the pool switched: database/sql closes the
// connection instead of keeping it.
func (c *switchConn) IsValid() bool { return c.current() && c.mysqlConn.IsValid() }

// ResetSession refuses a connection of an older generation taken from the
// pool: database/sql closes it and dials anew.
func (c *switchConn) ResetSession(ctx context.Context) error {
	if !c.current() {
		return driver.ErrBadConn
	}
	return c.mysqlConn.ResetSession(ctx)
}
