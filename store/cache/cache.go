// Package cache is a SET's memcached adapter: packet states, openers and
// the per-packet CAS slot counters, all advisory (MySQL is the truth).
package cache

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/metrics"
)

// ErrDown reports that memcached could not be reached. Callers fall
// back to the database, which is always the truth.
var ErrDown = errors.New("memcached unavailable")

// Cache is the memcached adapter of a SET. It keeps each packet's state and
// who has opened it, so grab and a repeated or sold-out open are answered
// without a transaction, and it holds the per-packet CAS slot counters.
//
// Everything in it is an optimisation: entries are written only after the
// database committed, remaining counts only decrease, so a stale or lost
// entry makes the server do more work, never answer differently.
type Cache struct {
	mc *memcache.Client
	// conns bounds concurrent calls to what gomemcache keeps idle: beyond
	// it every call would dial (and then close) a connection of its own.
	conns chan struct{}
	// slotMC is a client of its own for the CAS slots: the queue workers'
	// critical path must not wait behind the crowd's lookups.
	slotMC     *memcache.Client
	slotsConns chan struct{}
	log        *zap.Logger
	down       atomic.Int64 // unix nanos until which memcached is not tried
	seq        atomic.Uint64
	obs        *metrics.Cache // failures and fallbacks; nil: none
	pipe       *pipe          // pipelined sets of a batch's shares
	// now stamps and reads the slots' deadlines, which every server of
	// the SET compares with its own clock (time.Now unless WithClock).
	now func() time.Time
}

// WithClock makes the cache stamp and judge the slots' deadlines with
// now, the process's wall clock (configs.Clock): they cross servers.
func (c *Cache) WithClock(now func() time.Time) *Cache {
	c.now = now
	return c
}

// WithMetrics makes the cache count its failures and fallbacks in m.
func (c *Cache) WithMetrics(m *metrics.Cache) *Cache {
	c.obs = m
	return c
}

// New returns a Cache on the given memcached servers. conns should be
// at least the server's parallelism: gomemcache keeps only that many idle
// connections per server and dials for every request beyond it.
func New(servers []string, timeout time.Duration, conns int, log *zap.Logger) *Cache {
	mc := memcache.New(servers...)
	mc.Timeout = timeout
	mc.MaxIdleConns = conns
	sl := memcache.New(servers...)
	sl.Timeout = timeout
	sl.MaxIdleConns = slotConns
	return &Cache{mc: mc, log: log, conns: make(chan struct{}, conns), slotMC: sl, slotsConns: make(chan struct{}, slotConns),
		pipe: newPipe(servers, timeout, pipeConns), now: time.Now}
}

// slotConns bounds the slot client's connections.
const slotConns = 64

// pipeConns bounds the idle connections of the pipelined sets: one writer
// (the server's opener cache) uses them.
const pipeConns = 2

// breakFor is how long memcached is left alone after a failure, so a dead
// cache costs one timeout per interval instead of one per request.
const breakFor = time.Second

// do runs op on the lookup client's connections.
func (c *Cache) do(op func() error) error { return c.guard(c.conns, op) }

// doSlot runs op on the slot client's connections.
func (c *Cache) doSlot(op func() error) error { return c.guard(c.slotsConns, op) }

// guard runs op with one of conns unless memcached is known to be down, and
// turns connection failures into ErrDown (a miss or CAS conflict is
// passed through).
func (c *Cache) guard(conns chan struct{}, op func() error) error {
	if time.Now().UnixNano() < c.down.Load() {
		c.obs.Fallback()
		return ErrDown
	}
	conns <- struct{}{}
	err := op()
	<-conns
	if err == nil || errors.Is(err, memcache.ErrCacheMiss) || errors.Is(err, memcache.ErrCASConflict) ||
		errors.Is(err, memcache.ErrNotStored) {
		return err
	}
	c.obs.Error()
	if c.down.Swap(time.Now().Add(breakFor).UnixNano()) < time.Now().UnixNano() {
		c.log.Warn("memcached unavailable; serving from MySQL and the local cap", zap.Error(err))
	}
	return fmt.Errorf("%w: %v", ErrDown, err)
}

func stateKey(id hongbao.PacketID) string { return "hb:s:" + id.String() }
func userKey(id hongbao.PacketID, u hongbao.UserID) string {
	return "hb:u:" + id.String() + ":" + u.String()
}
func slotKey(id hongbao.PacketID) string { return "hb:c:" + id.String() }

// ttl keeps entries a day past expiry, in seconds as memcached counts them
// (relative TTLs must stay under 30 days, or memcached reads them as a date).
func ttl(expires time.Time) int32 {
	d := time.Until(expires) + 24*time.Hour
	const maxRelative = 30*24*time.Hour - time.Hour
	d = max(min(d, maxRelative), time.Hour)
	return int32(d / time.Second)
}

// State returns the cached state of id.
func (c *Cache) State(id hongbao.PacketID) (hongbao.State, bool) {
	var it *memcache.Item
	if c.do(func() (err error) { it, err = c.mc.Get(stateKey(id)); return err }) != nil {
		return hongbao.State{}, false
	}
	return parseState(it.Value)
}

// parseState reads "remaining_count,expires_unix_ms,closed" and, for a
// packet with an audience, ";" and the audience (hongbao.Audience.String).
func parseState(v []byte) (hongbao.State, bool) {
	head, aud, _ := strings.Cut(string(v), ";")
	parts := strings.Split(head, ",")
	if len(parts) != 3 {
		return hongbao.State{}, false
	}
	n, err1 := strconv.Atoi(parts[0])
	ms, err2 := strconv.ParseInt(parts[1], 10, 64)
	a, err3 := hongbao.ParseAudience(aud)
	if err1 != nil || err2 != nil || err3 != nil {
		return hongbao.State{}, false
	}
	return hongbao.State{RemainingCount: n, ExpiresAt: time.UnixMilli(ms), Closed: parts[2] == "1", Audience: a}, true
}

// SetState records the state of a packet after a commit.
func (c *Cache) SetState(id hongbao.PacketID, s hongbao.State) {
	closed := "0"
	if s.Closed {
		closed = "1"
	}
	v := strconv.Itoa(s.RemainingCount) + "," + strconv.FormatInt(s.ExpiresAt.UnixMilli(), 10) + "," + closed
	if s.Audience != nil {
		v += ";" + s.Audience.String() // at most ~10 kB: a group's 500 users
	}
	_ = c.do(func() error { // best effort: a lost write only costs a later DB read
		return c.mc.Set(&memcache.Item{Key: stateKey(id), Value: []byte(v), Expiration: ttl(s.ExpiresAt)})
	})
}

// Opened returns the share user holds in id, if the cache knows it.
func (c *Cache) Opened(id hongbao.PacketID, user hongbao.UserID) (int64, bool) {
	var it *memcache.Item
	if c.do(func() (err error) { it, err = c.mc.Get(userKey(id, user)); return err }) != nil {
		return 0, false
	}
	amount, err := strconv.ParseInt(string(it.Value), 10, 64)
	return amount, err == nil
}

// Lookup reads, in one round trip, what the cache knows of user's share
// in id and of id's state.
func (c *Cache) Lookup(id hongbao.PacketID, user hongbao.UserID) (amount int64, opened bool, st hongbao.State, stOK bool) {
	var items map[string]*memcache.Item
	uk, sk := userKey(id, user), stateKey(id)
	if c.do(func() (err error) { items, err = c.mc.GetMulti([]string{uk, sk}); return err }) != nil {
		return 0, false, hongbao.State{}, false
	}
	if it, ok := items[uk]; ok {
		if a, err := strconv.ParseInt(string(it.Value), 10, 64); err == nil {
			amount, opened = a, true
		}
	}
	if it, ok := items[sk]; ok {
		st, stOK = parseState(it.Value)
	}
	return amount, opened, st, stOK
}

// SetOpened records a committed share.
func (c *Cache) SetOpened(id hongbao.PacketID, user hongbao.UserID, amount int64, expires time.Time) {
	_ = c.do(func() error { // best effort, as SetState
		return c.mc.Set(&memcache.Item{Key: userKey(id, user), Value: strconv.AppendInt(nil, amount, 10), Expiration: ttl(expires)})
	})
}

// slotAttempts bounds the gets+cas loop; losing this many races in a row
// means the packet is hot enough that answering busy is right.
const slotAttempts = 8

// AcquireSlot takes one of limit slots of packet id: the number of
// transactions of one packet allowed inside the database at once, across
// every server of the SET. The counter is a memcached item updated with
// gets + cas. Each holder is listed with a deadline, so a slot held by a
// process that died frees itself after hold instead of leaking.
// It returns a token for ReleaseSlot, or ok=false when all slots are taken
// (or the races for them were lost), or ErrDown.
func (c *Cache) AcquireSlot(id hongbao.PacketID, limit int, hold time.Duration) (token string, ok bool, err error) {
	token = strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.FormatInt(int64(c.seq.Add(1)), 36)
	mine := func(now time.Time) string { return token + ":" + strconv.FormatInt(now.Add(hold).UnixMilli(), 10) }
	// Fast path, one round trip: nobody holds a slot of the packet.
	switch err := c.putSlots(id, nil, []string{mine(c.now())}, hold); {
	case err == nil:
		return token, true, nil
	case errors.Is(err, ErrDown):
		return "", false, err
	}
	for range slotAttempts {
		now := c.now()
		it, holders, err := c.slots(id)
		if err != nil {
			return "", false, err
		}
		holders = live(holders, now)
		if len(holders) >= limit {
			return "", false, nil
		}
		err = c.putSlots(id, it, append(holders, mine(now)), hold)
		switch {
		case err == nil:
			return token, true, nil
		case errors.Is(err, ErrDown):
			return "", false, err
		}
	}
	return "", false, nil
}

// ReleaseSlot gives back a slot taken by AcquireSlot. If it cannot (the
// cache went away, or races were lost) the holder's deadline frees it.
func (c *Cache) ReleaseSlot(id hongbao.PacketID, token string, hold time.Duration) {
	for range slotAttempts {
		it, holders, err := c.slots(id)
		if err != nil || it == nil {
			return
		}
		kept := holders[:0]
		for _, h := range holders {
			if !strings.HasPrefix(h, token+":") {
				kept = append(kept, h)
			}
		}
		if err := c.putSlots(id, it, live(kept, c.now()), hold); err == nil || errors.Is(err, ErrDown) {
			return
		}
	}
}

// slots reads the holder list; it is nil (and the item nil) when absent.
func (c *Cache) slots(id hongbao.PacketID) (*memcache.Item, []string, error) {
	var it *memcache.Item
	err := c.doSlot(func() (err error) { it, err = c.slotMC.Get(slotKey(id)); return err })
	switch {
	case errors.Is(err, memcache.ErrCacheMiss):
		return nil, nil, nil
	case err != nil:
		return nil, nil, err
	case len(it.Value) == 0:
		return it, nil, nil
	}
	return it, strings.Split(string(it.Value), ";"), nil
}

// putSlots writes holders back: cas over the item read, or add when there
// was none, so that a concurrent writer makes this attempt fail.
func (c *Cache) putSlots(id hongbao.PacketID, it *memcache.Item, holders []string, hold time.Duration) error {
	exp := int32(max(hold*2/time.Second, 2)) // seconds
	if it == nil {
		it = &memcache.Item{Key: slotKey(id)}
		it.Value, it.Expiration = []byte(strings.Join(holders, ";")), exp
		return c.doSlot(func() error { return c.slotMC.Add(it) })
	}
	it.Value, it.Expiration = []byte(strings.Join(holders, ";")), exp
	return c.doSlot(func() error { return c.slotMC.CompareAndSwap(it) })
}

// live drops holders whose deadline has passed.
func live(holders []string, now time.Time) []string {
	kept := holders[:0]
	for _, h := range holders {
		_, dl, _ := strings.Cut(h, ":")
		if ms, err := strconv.ParseInt(dl, 10, 64); err == nil && ms > now.UnixMilli() {
			kept = append(kept, h)
		}
	}
	return kept
}
