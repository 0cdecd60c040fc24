package sqldb

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestSwitchConnSeesServerClose: a Switch's connection is a syscall.Conn
// whose descriptor is the TCP connection's, so the driver's check of an
// idle connection before its reuse (connCheck: a non-blocking read that
// finds EOF when the server closed it, as a restarted MariaDB has) works
// on a Switch's pools as on the others.
func TestSwitchConnSeesServerClose(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tgt := &target{nets: map[net.Conn]struct{}{}}
	c, err := liveDial(tgt.dial)(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatalf("a Switch's connection (%T) is no syscall.Conn: the driver skips its liveness check", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	// What connCheck reads: nothing yet (EAGAIN) while the server lives,
	// EOF once it closed the connection.
	read := func() (int, error) {
		var n int
		var rerr error
		if err := raw.Read(func(fd uintptr) bool {
			var buf [1]byte
			n, rerr = syscall.Read(int(fd), buf[:])
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return n, rerr
	}
	if n, err := read(); n != -1 || err != syscall.EAGAIN {
		t.Fatalf("a live server's idle connection read %d, %v; want -1, EAGAIN", n, err)
	}
	server.Close()
	deadline := time.Now().Add(2 * time.Second)
	for {
		n, err := read()
		if n == 0 && err == nil {
			return // EOF: the driver would drop it and dial again
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the server's close the connection still reads %d, %v; want EOF", n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
