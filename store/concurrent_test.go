package store_test

// Integration tests of concurrent open transactions: pools and servers of
// one SET opening the same packets at once, with and without knowledge.
// Packet rows are locked in ID order (known packets by the writes, in table
// then ID order), so they wait for each other instead of deadlocking, and a
// deadlock between servers is retried.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
)

// TestOpenManyConcurrent: 8 goroutines on two Stores (pools) of one SET
// open overlapping sets of the same 20 packets in random orders with fresh
// users. No call fails (a deadlock that outlives the retries surfaces as
// busy); afterwards every packet's invariants hold, every Opened outcome
// is exactly one detail row (same user, same amount) and every openers map
// handed out is the packet's final shares.
func TestOpenManyConcurrent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	loc := dbtest.Shanghai(t)
	dbs := []*sql.DB{dbtest.DB(t, "a", 8), dbtest.DB(t, "a", 8)}
	set := dbtest.UniqueName("om")
	buckets := randomBuckets(3)
	dbtest.Own(t, dbs[0], set, buckets)
	stores := []*store.Store{
		store.New(dbs[0], set, loc, time.Now, rand.Int64N),
		store.New(dbs[1], set, loc, time.Now, rand.Int64N),
	}
	const npackets = 20
	ids := make([]hongbao.PacketID, npackets)
	for i := range ids {
		// Small packets sell out early, the large ones stay contended
		// for most of the run.
		sp := []packetSpec{{hongbao.Random, 500, 5}, {hongbao.Fixed, 1000, 10}, {hongbao.Random, 30000, 300}, {hongbao.Random, 100000, 1000}}[i%4]
		ids[i] = createPacket(t, stores[i%2], buckets[i%len(buckets)], sp, hongbao.Funded)
	}
	deadlocks0 := innodbDeadlocks(t, dbs[0])

	type opened struct {
		id     hongbao.PacketID
		user   hongbao.UserID
		amount int64
	}
	var (
		mu       sync.Mutex
		opens    []opened
		soldOut  = map[hongbao.PacketID]int{}
		openers  = map[hongbao.PacketID][]map[hongbao.UserID]int64{}
		calls    int
		failures []string
	)
	// 1.5 s of load, and on until a sold_out answer was seen (30 s at
	// most): a starved machine makes few rounds in 1.5 s.
	more := runFor(1500*time.Millisecond, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(soldOut) > 0
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			st := stores[g%2]
			r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			for round := 0; round < 400 && more(); round++ {
				perm := r.Perm(npackets)[:2+r.IntN(7)]
				works := make([]store.Work, len(perm))
				for i, pi := range perm {
					us := []hongbao.UserID{dbtest.FreshUser()}
					for range r.IntN(3) {
						us = append(us, dbtest.FreshUser())
					}
					if r.IntN(4) == 0 {
						us = append(us, us[r.IntN(len(us))])
					}
					works[i] = store.Work{ID: ids[pi], Users: us, SoldOutOpenersUpTo: []int{0, 10, 2000}[r.IntN(3)]}
				}
				bs, err := st.OpenMany(ctx, works)
				mu.Lock()
				calls++
				if err != nil {
					kind := "error"
					if errors.Is(err, hongbao.ErrBusy) {
						kind = "busy (deadlocks or lock waits outlived the retries)"
					}
					failures = append(failures, fmt.Sprintf("goroutine %d round %d: %s: %v", g, round, kind, err))
					mu.Unlock()
					continue
				}
				if len(bs) != len(works) {
					failures = append(failures, fmt.Sprintf("%d batches for %d works", len(bs), len(works)))
				}
				for i, b := range bs[:min(len(bs), len(works))] {
					w := works[i]
					if len(b.Outcomes) != len(w.Users) {
						failures = append(failures, fmt.Sprintf("packet %s: %d outcomes for %d users", w.ID, len(b.Outcomes), len(w.Users)))
						continue
					}
					mine := map[hongbao.UserID]int64{}
					for j, o := range b.Outcomes {
						u := w.Users[j]
						switch {
						case errors.Is(o.Err, hongbao.ErrSoldOut):
							soldOut[w.ID]++
						case o.Err != nil:
							failures = append(failures, fmt.Sprintf("packet %s user %s: %v", w.ID, u, o.Err))
						case o.Result.User != u:
							failures = append(failures, fmt.Sprintf("packet %s: outcome of %s answers %s", w.ID, u, o.Result.User))
						case o.Result.Status == hongbao.Opened:
							if _, ok := mine[u]; ok {
								failures = append(failures, fmt.Sprintf("packet %s: %s opened twice in one work", w.ID, u))
							}
							mine[u] = o.Result.Amount
							opens = append(opens, opened{w.ID, u, o.Result.Amount})
						case o.Result.Status == hongbao.AlreadyOpened:
							// Users are fresh: only a second arrival in the same work has a share.
							if a, ok := mine[u]; !ok || a != o.Result.Amount {
								failures = append(failures, fmt.Sprintf("packet %s: %s already_opened %d, opened %d in this work (%v)",
									w.ID, u, o.Result.Amount, a, ok))
							}
						default:
							failures = append(failures, fmt.Sprintf("packet %s: outcome %+v", w.ID, o))
						}
					}
					if b.Openers != nil {
						openers[w.ID] = append(openers[w.ID], b.Openers)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	reportFailures(t, failures)

	byPacket := map[hongbao.PacketID]map[hongbao.UserID]int64{}
	var sumOpened int64
	for _, o := range opens {
		if byPacket[o.id] == nil {
			byPacket[o.id] = map[hongbao.UserID]int64{}
		}
		if _, ok := byPacket[o.id][o.user]; ok {
			t.Errorf("packet %s: user %s got opened twice", o.id, o.user)
		}
		byPacket[o.id][o.user] = o.amount
		sumOpened += o.amount
	}
	var rows int
	var sumShares int64
	soldOutPackets := 0
	for _, id := range ids {
		p := dbtest.CheckPacket(t, dbs[0], id)
		rows += len(p.Details)
		for _, s := range p.Details {
			sumShares += s.Amount
		}
		if !maps.Equal(p.Shares, byPacket[id]) {
			t.Errorf("packet %s: MySQL shares %d (%d fen) differ from the opened outcomes %d", id, len(p.Shares), p.Total-p.RemainingAmount, len(byPacket[id]))
		}
		if soldOut[id] > 0 && p.RemainingCount != 0 {
			t.Errorf("packet %s: %d sold_out outcomes but %d shares left", id, soldOut[id], p.RemainingCount)
		}
		if p.RemainingCount == 0 {
			soldOutPackets++
		}
		for _, m := range openers[id] {
			if !maps.Equal(m, p.Shares) {
				t.Errorf("packet %s: openers handed out %v, final shares %v", id, m, p.Shares)
			}
		}
		checkCredits(t, dbs[0], p)
	}
	if len(opens) != rows || sumOpened != sumShares {
		t.Errorf("%d opened outcomes for %d fen, %d detail rows for %d fen", len(opens), sumOpened, rows, sumShares)
	}
	if soldOutPackets == 0 || len(opens) == 0 {
		t.Errorf("%d calls, %d opens and %d sold-out packets: the run did not exercise contention", calls, len(opens), soldOutPackets)
	}
	t.Logf("%d OpenMany calls, %d shares, %d of %d packets sold out; server Innodb_deadlocks +%d during the run (retried inside the store; the counter is server-wide)",
		calls, len(opens), soldOutPackets, npackets, innodbDeadlocks(t, dbs[0])-deadlocks0)
}

// TestKnownConcurrentServers proves two servers with their own, stale-going knowledge of the same packets never double spend or answer a share MySQL does not hold.
func TestKnownConcurrentServers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	loc := dbtest.Shanghai(t)
	set := dbtest.UniqueName("km")
	buckets := randomBuckets(3)
	type server struct {
		st    *store.Store
		rnd   *drawSource
		mu    sync.Mutex
		known map[hongbao.PacketID]*hongbao.Snapshot
	}
	var servers []*server
	for i := range 2 {
		db := dbtest.DB(t, "a", 8)
		if i == 0 {
			dbtest.Own(t, db, set, buckets)
		}
		rnd := newDrawSource(uint64(time.Now().UnixNano()) + uint64(i))
		servers = append(servers, &server{st: store.New(db, set, loc, time.Now, rnd.intn), rnd: rnd, known: map[hongbao.PacketID]*hongbao.Snapshot{}})
	}
	db := dbtest.DB(t, "a", 2)
	specs := []packetSpec{{hongbao.Random, 2000, 20}, {hongbao.Fixed, 3000, 30}, {hongbao.Random, 30000, 300}, {hongbao.Random, 500, 5},
		{hongbao.Random, 100000, 1000}, {hongbao.Fixed, 800, 8}}
	const npackets = 12
	ids := make([]hongbao.PacketID, npackets)
	typ := map[hongbao.PacketID]packetSpec{}
	for i := range ids {
		ids[i] = createPacket(t, servers[i%2].st, buckets[i%len(buckets)], specs[i%len(specs)], hongbao.Funded)
		typ[ids[i]] = specs[i%len(specs)]
	}
	// A pool of users shared by both servers: the same user opens the same
	// packet through both, and again.
	pool := make([]hongbao.UserID, 60)
	for i := range pool {
		pool[i] = dbtest.FreshUser()
	}
	type answer struct {
		id     hongbao.PacketID
		user   hongbao.UserID
		amount int64
		status string
	}
	var (
		mu                      sync.Mutex
		answers                 []answer
		soldOut                 = map[hongbao.PacketID]int{}
		failures                []string
		calls, fast, retried    int
		knownWorks, knownAnswer int
	)
	// 1.5 s of load, and on until both paths ran (30 s at most).
	more := runFor(1500*time.Millisecond, 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return fast > 0 && retried > 0
	})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			sv := servers[g%2]
			r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			for round := 0; round < 300 && more(); round++ {
				// Disjoint packets for each server some of the time, the same
				// ones most of the time.
				var choice []int
				if r.IntN(4) == 0 {
					choice = r.Perm(npackets / 2)[:1+r.IntN(3)]
					for i := range choice {
						choice[i] = 2*choice[i] + g%2
					}
				} else {
					choice = r.Perm(npackets)[:1+r.IntN(4)]
				}
				works := make([]store.Work, len(choice))
				nknown := 0
				sv.mu.Lock()
				for i, pi := range choice {
					us := []hongbao.UserID{pool[r.IntN(len(pool))]}
					for range r.IntN(3) {
						us = append(us, pool[r.IntN(len(pool))])
					}
					works[i] = store.Work{ID: ids[pi], Users: us, OpenersUpTo: 1000}
					if k := sv.known[ids[pi]]; k != nil {
						works[i].Known = markKnown(k)
						nknown++
					}
				}
				sv.mu.Unlock()
				bs, err := sv.st.OpenMany(ctx, works)
				sv.mu.Lock()
				for i, b := range bs {
					if b.Packet != nil && b.Openers != nil && b.Packet.RemainingCount > 0 && !b.Packet.Closed {
						sv.known[works[i].ID] = &hongbao.Snapshot{Packet: *b.Packet, Openers: b.Openers}
					} else {
						delete(sv.known, works[i].ID)
					}
				}
				sv.mu.Unlock()
				mu.Lock()
				calls++
				knownWorks += nknown
				if err != nil {
					failures = append(failures, fmt.Sprintf("goroutine %d round %d: %v", g, round, err))
					mu.Unlock()
					continue
				}
				if nknown > 0 {
					if slices.ContainsFunc(bs, func(b store.Batch) bool { return b.Packet != nil && b.Packet.Greeting == knownMarker }) {
						fast++
					} else {
						retried++
					}
				}
				for i, b := range bs {
					w := works[i]
					if len(b.Outcomes) != len(w.Users) {
						failures = append(failures, fmt.Sprintf("packet %s: %d outcomes for %d users", w.ID, len(b.Outcomes), len(w.Users)))
						continue
					}
					for j, o := range b.Outcomes {
						u := w.Users[j]
						switch {
						case errors.Is(o.Err, hongbao.ErrSoldOut):
							soldOut[w.ID]++
						case o.Err != nil:
							failures = append(failures, fmt.Sprintf("packet %s user %s: %v", w.ID, u, o.Err))
						case o.Result.User != u:
							failures = append(failures, fmt.Sprintf("packet %s: outcome of %s answers %s", w.ID, u, o.Result.User))
						default:
							answers = append(answers, answer{w.ID, u, o.Result.Amount, o.Result.Status})
							if o.Result.Status == hongbao.AlreadyOpened && w.Known != nil && b.Packet.Greeting == knownMarker {
								if _, ok := w.Known.Openers[u]; ok {
									knownAnswer++
								}
							}
						}
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	reportFailures(t, failures)

	opened := map[hongbao.PacketID]map[hongbao.UserID]int64{}
	for _, a := range answers {
		if a.status != hongbao.Opened {
			continue
		}
		if opened[a.id] == nil {
			opened[a.id] = map[hongbao.UserID]int64{}
		}
		if prev, ok := opened[a.id][a.user]; ok {
			t.Errorf("packet %s: user %s opened twice (%d and %d fen)", a.id, a.user, prev, a.amount)
		}
		opened[a.id][a.user] = a.amount
	}
	shares := map[hongbao.PacketID]map[hongbao.UserID]int64{}
	needed := 0 // draws the committed shares took
	for _, id := range ids {
		p := dbtest.CheckPacket(t, db, id)
		shares[id] = p.Shares
		checkCredits(t, db, p)
		if len(p.Shares) != len(p.Details) || len(p.Details) > p.Count {
			t.Errorf("packet %s: %d rows for %d users, count %d", id, len(p.Details), len(p.Shares), p.Count)
		}
		if !maps.Equal(p.Shares, opened[id]) {
			t.Errorf("packet %s: MySQL shares %v, opened answers %v", id, p.Shares, opened[id])
		}
		if soldOut[id] > 0 && p.RemainingCount != 0 {
			t.Errorf("packet %s: %d sold_out answers, %d shares left", id, soldOut[id], p.RemainingCount)
		}
		if typ[id].typ == hongbao.Random {
			needed += len(p.Details)
			if p.RemainingCount == 0 {
				needed-- // the last share takes the rest without a draw
			}
		}
	}
	for _, a := range answers {
		if got, ok := shares[a.id][a.user]; !ok || got != a.amount {
			t.Errorf("packet %s: %s answered %s %d fen, MySQL has %d (%v)", a.id, a.user, a.status, a.amount, got, ok)
		}
	}
	draws := servers[0].rnd.count() + servers[1].rnd.count()
	t.Logf("%d calls, %d known works; %d calls applied from knowledge, %d retried from MySQL; %d answers from knowledge of %d; %d draws, %d kept",
		calls, knownWorks, fast, retried, knownAnswer, len(answers), draws, needed)
	if draws < needed {
		t.Errorf("%d draws for %d committed random shares", draws, needed)
	}
	if fast == 0 || retried == 0 || draws == needed {
		t.Errorf("fast calls %d, retried calls %d, discarded draws %d: the run did not exercise both the fast path and stale knowledge",
			fast, retried, draws-needed)
	}
}

// runFor returns whether a load loop goes on: for at least least, then
// until covered reports that the run did what the test asserts it did,
// for most at the longest.
func runFor(least, most time.Duration, covered func() bool) func() bool {
	start := time.Now()
	return func() bool {
		d := time.Since(start)
		return d < least || (d < most && !covered())
	}
}
