package cache

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	hongbao "github.com/hongbao-dev/hongbao"
)

// Share is one committed share of a packet, for SetOpenedMany.
type Share struct {
	User   hongbao.UserID
	Amount int64
}

// SetOpenedMany records the committed shares of one batch of packet id in
// one round trip per memcached server: every set written in one go, then
// every reply read. gomemcache pays a round trip (a write, a read and a
// wake-up on both sides) per set, which made the per-share writes of a hot
// packet about 14% of its server's CPU. Best effort, as SetOpened.
func (c *Cache) SetOpenedMany(id hongbao.PacketID, shares []Share, expires time.Time) {
	switch len(shares) {
	case 0:
		return
	case 1:
		c.SetOpened(id, shares[0].User, shares[0].Amount, expires)
		return
	}
	exp := ttl(expires)
	items := make([]pipeItem, len(shares))
	for i, s := range shares {
		items[i] = pipeItem{key: userKey(id, s.User), value: strconv.AppendInt(nil, s.Amount, 10), exp: exp}
	}
	_ = c.do(func() error { return c.pipe.setMany(items) })
}

// pipeItem is one set of a pipelined round.
type pipeItem struct {
	key   string
	value []byte
	exp   int32
}

// pipe writes pipelined sets over connections of its own, one pool of
// idle connections per memcached server; keys go to the servers
// gomemcache's client would pick, so reads through it find them.
type pipe struct {
	servers memcache.ServerList
	timeout time.Duration
	maxIdle int

	mu   sync.Mutex
	idle map[string][]net.Conn
}

func newPipe(servers []string, timeout time.Duration, maxIdle int) *pipe {
	p := &pipe{timeout: timeout, maxIdle: max(maxIdle, 1), idle: map[string][]net.Conn{}}
	_ = p.servers.SetServers(servers...) // a bad address fails each call, as gomemcache's does
	return p
}

// setMany sets every item, grouped by server, one round trip per server.
func (p *pipe) setMany(items []pipeItem) error {
	groups := map[string][]pipeItem{}
	addrs := map[string]net.Addr{}
	for _, it := range items {
		a, err := p.servers.PickServer(it.key)
		if err != nil {
			return fmt.Errorf("memcached server of %s: %w", it.key, err)
		}
		groups[a.String()] = append(groups[a.String()], it)
		addrs[a.String()] = a
	}
	var errs []error
	for s, g := range groups {
		errs = append(errs, p.setOn(addrs[s], g))
	}
	return errors.Join(errs...)
}

// setOn writes items to one server in one write and reads their replies;
// a connection that failed, or answered anything but STORED, is closed
// (its stream cannot be trusted to be in step any more).
func (p *pipe) setOn(addr net.Addr, items []pipeItem) error {
	conn, err := p.conn(addr)
	if err != nil {
		return err
	}
	if err := p.round(conn, items); err != nil {
		conn.Close()
		return fmt.Errorf("memcached %s: pipelined set: %w", addr, err)
	}
	p.put(addr.String(), conn)
	return nil
}

func (p *pipe) round(conn net.Conn, items []pipeItem) error {
	if err := conn.SetDeadline(time.Now().Add(p.timeout)); err != nil {
		return err
	}
	size := 0
	for _, it := range items {
		size += len(it.key) + len(it.value) + 40
	}
	buf := make([]byte, 0, size)
	for _, it := range items {
		buf = appendSet(buf, it)
	}
	if _, err := conn.Write(buf); err != nil {
		return err
	}
	r := bufio.NewReaderSize(conn, 256)
	for range items {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if string(line) != "STORED\r\n" {
			return fmt.Errorf("reply %q", line)
		}
	}
	return nil
}

// appendSet appends memcached's text protocol set of it (flags 0).
func appendSet(buf []byte, it pipeItem) []byte {
	buf = append(buf, "set "...)
	buf = append(buf, it.key...)
	buf = append(buf, " 0 "...)
	buf = strconv.AppendInt(buf, int64(it.exp), 10)
	buf = append(buf, ' ')
	buf = strconv.AppendInt(buf, int64(len(it.value)), 10)
	buf = append(buf, "\r\n"...)
	buf = append(buf, it.value...)
	return append(buf, "\r\n"...)
}

func (p *pipe) conn(addr net.Addr) (net.Conn, error) {
	p.mu.Lock()
	if cs := p.idle[addr.String()]; len(cs) > 0 {
		c := cs[len(cs)-1]
		p.idle[addr.String()] = cs[:len(cs)-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	c, err := net.DialTimeout(addr.Network(), addr.String(), p.timeout)
	if err != nil {
		return nil, fmt.Errorf("memcached %s: %w", addr, err)
	}
	return c, nil
}

func (p *pipe) put(addr string, c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle[addr]) >= p.maxIdle {
		c.Close()
		return
	}
	p.idle[addr] = append(p.idle[addr], c)
}
