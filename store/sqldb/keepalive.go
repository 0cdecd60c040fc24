package sqldb

import (
	"context"
	"fmt"
	"net"
	"time"
)

// A MariaDB whose host vanishes (power lost, a partition) sends no FIN or
// RST: a client waiting on it waits until its kernel gives up on the
// connection. Left to Go's defaults that is 150 s for a statement the
// server acknowledged (keepalive: 15 s idle, then 9 probes 15 s apart)
// and about 15 min for one it never acknowledged (Linux retransmits it,
// tcp_retries2). Every connection of hongbao's pools is therefore probed
// after keepaliveIdle, every keepaliveInterval, dropped after
// keepaliveCount unanswered probes, and dropped when data it sent is
// unacknowledged for userTimeout (TCP_USER_TIMEOUT, which also caps the
// keepalive): a vanished server is an error within 25 s (e2e/liveness).
//
// The probes are answered by the server's kernel, not by mariadbd: a live
// server busy with a long statement (a semi-sync commit waiting for its
// replica, MASTER_GTID_WAIT, a big copy) is never cut, which a read
// timeout could not promise. That is why the pools set no readTimeout by
// default (see connectorDial).
const (
	keepaliveIdle     = 10 * time.Second
	keepaliveInterval = 3 * time.Second
	keepaliveCount    = 3
	userTimeout       = 20 * time.Second
)

// dialFunc is how the driver opens a connection.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// liveDial wraps dial (nil: a net.Dialer) so that every TCP connection it
// opens has hongbao's keepalive and user timeout. A dial from elsewhere
// (a test's host, hosts.Host.Dial) gets them too.
func liveDial(dial dialFunc) dialFunc {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc, ok := tcpOf(c)
		if !ok { // a Unix socket: no network to lose
			return c, nil
		}
		if err := tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true,
			Idle: keepaliveIdle, Interval: keepaliveInterval, Count: keepaliveCount}); err != nil {
			c.Close()
			return nil, fmt.Errorf("sqldb: keepalive on %s: %w", addr, err)
		}
		if err := setUserTimeout(tc, userTimeout); err != nil {
			c.Close()
			return nil, fmt.Errorf("sqldb: TCP_USER_TIMEOUT on %s: %w", addr, err)
		}
		return c, nil
	}
}

// wrapped is a connection that wraps another (a Switch's trackedConn).
type wrapped interface{ NetConn() net.Conn }

// tcpOf is the TCP connection c is or wraps. A Switch's pool dials through
// its target, which wraps each connection to close it on a switch: before
// this unwrapped it, the SET pools of every server and settler had none of
// the keepalive above (Go's default of 15 s idle and 9 probes, and no user
// timeout), so a vanished SET primary held their statements for minutes.
func tcpOf(c net.Conn) (*net.TCPConn, bool) {
	for {
		switch v := c.(type) {
		case *net.TCPConn:
			return v, true
		case wrapped:
			c = v.NetConn()
		default:
			return nil, false
		}
	}
}
