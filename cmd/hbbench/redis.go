package main

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	hongbao "github.com/hongbao-dev/hongbao"
)

// redisDesign is the seeds' design: shares pre-split into a Redis list at
// send, an open is one Lua script (pop a share, remember the opener, queue
// the write), and writers copy the queued shares to MySQL asynchronously.
// Its weakness is durability: an open is answered before MySQL has it, so
// losing Redis (no fsync per write) or a writer between pop and insert
// loses acknowledged shares. BENCHMARKS.md reports it.
type redisDesign struct {
	rdb     *redis.Client
	db      *sql.DB
	loc     *time.Location
	run     string // key prefix of this run
	writers int
	stop    chan struct{}
	wg      sync.WaitGroup
	errMu   sync.Mutex
	werr    error
	pushed  atomic.Int64 // shares acknowledged to clients
	settled atomic.Int64 // shares written to MySQL, or lost by a failed write
}

// openScript: already opened -> {1, amount}; sold out -> {2, 0};
// else pop a share, record it and queue it for MySQL -> {0, amount}.
var openScript = redis.NewScript(`
local a = redis.call('HGET', KEYS[2], ARGV[1])
if a then return {1, a} end
local s = redis.call('LPOP', KEYS[1])
if not s then return {2, 0} end
redis.call('HSET', KEYS[2], ARGV[1], s)
redis.call('RPUSH', KEYS[3], ARGV[2] .. ':' .. ARGV[1] .. ':' .. s)
return {0, s}`)

func newRedisDesign(addr string, db *sql.DB, loc *time.Location, writers int) *redisDesign {
	d := &redisDesign{rdb: redis.NewClient(&redis.Options{Addr: addr, PoolSize: 512}), db: db, loc: loc,
		run: "hb:" + strconv.FormatInt(time.Now().UnixNano(), 36), writers: writers, stop: make(chan struct{})}
	for i := range writers {
		d.wg.Add(1)
		go d.writer(d.writesKey(i))
	}
	return d
}

func (d *redisDesign) name() string { return "redis+lua" }

func (d *redisDesign) keys(id hongbao.PacketID) []string {
	p := d.run + ":" + id.String()
	return []string{p + ":shares", p + ":opened", d.writesKey(int(uint64(id) % uint64(d.writers)))}
}

// writesKey is writer i's list: a packet's writes all go to one writer, so
// writers never wait for each other's row locks.
func (d *redisDesign) writesKey(i int) string { return d.run + ":writes:" + strconv.Itoa(i) }

func (d *redisDesign) prepare(ctx context.Context, ps []*hongbao.Packet) error {
	pipe := d.rdb.Pipeline()
	for _, p := range ps {
		shares := hongbao.Split(p.Type, p.Total, p.Count, rand.Int64N)
		for i := 0; i < len(shares); i += 10000 {
			vals := make([]any, 0, 10000)
			for _, s := range shares[i:min(i+10000, len(shares))] {
				vals = append(vals, s)
			}
			pipe.RPush(ctx, d.keys(p.ID)[0], vals...)
		}
	}
	_, err := pipe.Exec(ctx)
	return err
}

func (d *redisDesign) open(ctx context.Context, id hongbao.PacketID, u hongbao.UserID) (int64, error) {
	res, err := openScript.Run(ctx, d.rdb, d.keys(id), u.String(), id.String()).Slice()
	if err != nil {
		return 0, err
	}
	code, _ := res[0].(int64)
	amount, _ := strconv.ParseInt(fmt.Sprint(res[1]), 10, 64)
	if code == 2 {
		return 0, hongbao.ErrSoldOut
	}
	if code == 0 {
		d.pushed.Add(1)
	}
	return amount, nil
}

// writer moves queued shares to MySQL, grouped by packet, 200 at a time.
func (d *redisDesign) writer(key string) {
	defer d.wg.Done()
	ctx := context.Background()
	for {
		items, err := d.rdb.LPopCount(ctx, key, 200).Result()
		if err == redis.Nil || len(items) == 0 {
			select {
			case <-d.stop:
				return
			case <-time.After(2 * time.Millisecond):
				continue
			}
		}
		if err != nil {
			d.fail(err)
			continue
		}
		if err := d.write(ctx, items); err != nil {
			// The shares were popped and acknowledged: this is the loss
			// the design risks.
			d.fail(err)
		}
		d.settled.Add(int64(len(items)))
	}
}

func (d *redisDesign) write(ctx context.Context, items []string) error {
	type group struct {
		users   []hongbao.UserID
		amounts []int64
	}
	groups := map[hongbao.PacketID]*group{}
	for _, it := range items {
		parts := strings.Split(it, ":")
		id, _ := strconv.ParseInt(parts[0], 10, 64)
		u, _ := strconv.ParseInt(parts[1], 10, 64)
		a, _ := strconv.ParseInt(parts[2], 10, 64)
		g := groups[hongbao.PacketID(id)]
		if g == nil {
			g = &group{}
			groups[hongbao.PacketID(id)] = g
		}
		g.users, g.amounts = append(g.users, hongbao.UserID(u)), append(g.amounts, a)
	}
	// One transaction for the whole batch, packets locked in ID order so
	// the writers never deadlock: a writer as good as the queue's
	// committers, so the baseline is not slowed by a naive one.
	ids := make([]hongbao.PacketID, 0, len(groups))
	for id := range groups {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck
	for _, id := range ids {
		g := groups[id]
		if err := batchInsert(ctx, tx, id.Table(d.loc), id, g.users, g.amounts); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (d *redisDesign) fail(err error) {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	if d.werr == nil {
		d.werr = err
	}
}

// writerErr is the first failed write to MySQL, if any.
func (d *redisDesign) writerErr() error {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	return d.werr
}

// drain waits until every acknowledged share was written (or lost).
func (d *redisDesign) drain(ctx context.Context) error {
	for {
		if d.settled.Load() >= d.pushed.Load() {
			d.errMu.Lock()
			defer d.errMu.Unlock()
			return d.werr
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (d *redisDesign) close() {
	close(d.stop)
	d.wg.Wait()
	d.rdb.Close()
}
