package dbtest

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a server. Partition makes it a network
// that drops every packet: established connections stay open (neither end
// sees a close or a reset, so a MariaDB replica still believes it is
// connected and a client waits on its read) and carry nothing either way;
// new connections are accepted and held silent. Heal forwards again, on
// new connections; those held during the partition are closed then, as a
// peer's TCP timeout eventually would. Reopen forwards new connections
// but leaves those held silent and open, as connections whose peer
// forgot them or whose retransmissions back off for minutes: a client
// recovers only by giving up on them.
type Proxy struct {
	ln net.Listener
	to string

	mu    sync.Mutex
	cut   bool
	conns []net.Conn
	held  map[net.Conn]bool // silent for good (Reopen)
}

// StartProxy starts a proxy to the server at to on a free local port,
// closed with every connection when the test ends.
func StartProxy(t testing.TB, to string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, to: to}
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
	})
	go p.serve()
	return p
}

// Addr is the proxy's host:port, to dial instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's port.
func (p *Proxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Partition stops carrying bytes, leaving every connection open.
func (p *Proxy) Partition() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

// Reopen ends a partition for new connections only: every connection open
// now stays silent (and open) for good.
func (p *Proxy) Reopen() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = map[net.Conn]bool{}
	}
	for _, c := range p.conns {
		p.held[c] = true
	}
	p.cut = false
}

// Heal ends a partition: the connections it held are closed (their peers
// see them fail and reconnect) and new ones are forwarded.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
	p.closeAll()
}

// silent reports whether c carries nothing now.
func (p *Proxy) silent(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut || p.held[c]
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns, p.held = nil, nil
}

func (p *Proxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c)
		if p.silent(c) {
			continue // held silent until healed
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.to)
	if err != nil {
		c.Close()
		return
	}
	p.track(s)
	go p.pipe(s, c)
	p.pipe(c, s)
}

// pipe copies from src to dst until either fails, dropping what it reads
// during a partition.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.silent(src) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
