package sqldb

import (
	"context"
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLiveDial: a connection dialled for a pool, by the default dialer, by
// a caller's or by a Switch's target (which wraps it), is probed after 10 s
// idle, every 3 s, dropped after 3 probes, and when its data is
// unacknowledged for 20 s.
func TestLiveDial(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var own net.Dialer
	switched := &target{nets: map[net.Conn]struct{}{}}
	for name, dial := range map[string]dialFunc{"default": nil, "the caller's": own.DialContext, "a Switch's": switched.dial} {
		c, err := liveDial(dial)(context.Background(), "tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		tc, ok := tcpOf(c)
		if !ok {
			t.Fatalf("%s dialer: %T is no TCP connection", name, c)
		}
		raw, err := tc.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		err = raw.Control(func(fd uintptr) {
			for opt, o := range map[string][2]int{
				"SO_KEEPALIVE":     {unix.SOL_SOCKET, unix.SO_KEEPALIVE},
				"TCP_KEEPIDLE":     {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE},
				"TCP_KEEPINTVL":    {unix.IPPROTO_TCP, unix.TCP_KEEPINTVL},
				"TCP_KEEPCNT":      {unix.IPPROTO_TCP, unix.TCP_KEEPCNT},
				"TCP_USER_TIMEOUT": {unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT},
			} {
				v, err := unix.GetsockoptInt(int(fd), o[0], o[1])
				if err != nil {
					t.Errorf("%s: %v", opt, err)
				}
				got[opt] = v
			}
		})
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"SO_KEEPALIVE": 1, "TCP_KEEPIDLE": 10, "TCP_KEEPINTVL": 3, "TCP_KEEPCNT": 3, "TCP_USER_TIMEOUT": 20000}
		for opt, w := range want {
			if got[opt] != w {
				t.Errorf("%s dialer: %s = %d, want %d", name, opt, got[opt], w)
			}
		}
	}
}
