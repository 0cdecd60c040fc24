package set

import (
	"slices"
	"sync"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store"
)

// known holds, for the packets still taking opens that this server opened
// lately, the packet as its last transaction here left it and, for the
// small ones, every share it had then. With the shares a repeated open is
// answered from memory and a new open goes to the queue without a
// memcached lookup; with or without them the packet's next transaction
// skips its reads (hongbao.Snapshot; a large packet's is Unlisted, and a
// transaction carrying a repeated open of it fails on the details' key and
// is applied again, reading). It is a belief, never trusted for money: the
// store's writes check it, and only what can never change (a committed
// share) is answered from it directly.
//
// It is bounded like the sold-out memo: by the shares it holds, counting
// each packet as knownCost shares more; the packets learnt first are
// forgotten first.
type known struct {
	mu      sync.RWMutex
	limit   int // shares held at most; 0: know nothing
	held    int
	packets map[hongbao.PacketID]knownEntry
	order   []knownName // oldest first; may name packets forgotten since
	gen     uint64      // of the last packet learnt anew
	// away marks the buckets the SET does not own (as follow last heard):
	// nothing is learnt of their packets.
	away [hongbao.Buckets]bool
}

// knownEntry is a known packet; its Known is replaced on learning, never
// changed, so readers use it without the lock.
type knownEntry struct {
	kn  *hongbao.Snapshot
	gen uint64
}

// knownName names a packet in the eviction order; a name whose generation
// is not the packet's is that of a packet forgotten and learnt again.
type knownName struct {
	id  hongbao.PacketID
	gen uint64
}

// knownCost is what a packet costs beyond its shares, in shares (the
// packet itself and its map of openers, about 300 bytes).
const knownCost = 8

// knownUpTo is the largest packet (in shares) worth knowing: every
// transaction copies the packet's openers, which is nothing next to the
// transaction for a group's packet and too much for an activity's, whose
// batches are long anyway.
const knownUpTo = 1000

func newKnown(limit int) *known {
	return &known{limit: max(limit, 0), packets: map[hongbao.PacketID]knownEntry{}}
}

// upTo is the largest packet the server asks every opener of.
func (k *known) upTo() int { return min(knownUpTo, k.limit/4) }

// get returns what is known of id, nil when nothing is or the packet no
// longer takes opens at now (an expired packet's answers must come from
// MySQL: a share opened elsewhere would otherwise read as expired).
func (k *known) get(id hongbao.PacketID, now time.Time) *hongbao.Snapshot {
	k.mu.RLock()
	kn := k.packets[id].kn
	k.mu.RUnlock()
	if kn == nil || kn.Packet.StatusAt(now) != hongbao.Active {
		return nil
	}
	return kn
}

// answer answers an open of id by user from memory when user's share is
// known (a committed share never changes). live reports whether id is
// known and still taking opens, so the open needs no cache lookup.
func (k *known) answer(id hongbao.PacketID, user hongbao.UserID, now time.Time) (o hongbao.Outcome, answered, live bool) {
	kn := k.get(id, now)
	if kn == nil || kn.Unlisted { // an unlisted packet's openers are memcached's
		return hongbao.Outcome{}, false, false
	}
	if amount, ok := kn.Openers[user]; ok {
		return hongbao.Outcome{Result: hongbao.OpenResult{User: user, Amount: amount, Status: hongbao.AlreadyOpened}}, true, true
	}
	return hongbao.Outcome{}, false, true
}

// learn records what a committed transaction left of packet id, while
// the packet takes opens: with every opener if it has at most upTo shares
// and the batch carries them, unlisted if it has more; forgotten otherwise
// (a sold-out packet is the memo's).
func (k *known) learn(id hongbao.PacketID, b store.Batch, now time.Time) {
	if b.Packet == nil || b.Packet.StatusAt(now) != hongbao.Active || b.Openers == nil && b.Packet.Count <= k.upTo() {
		k.forget(id)
		return
	}
	kn := &hongbao.Snapshot{Packet: *b.Packet, Openers: b.Openers}
	if b.Packet.Count > k.upTo() {
		kn.Openers, kn.Unlisted = nil, true
	}
	kn.Packet.Greeting = "" // up to a kilobyte nobody asks the known packet for
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.away[id.Bucket()] { // a transaction that committed just before its bucket left
		return
	}
	e, ok := k.packets[id]
	if ok {
		k.held -= len(e.kn.Openers) + knownCost
	} else {
		k.gen++
		e.gen = k.gen
		k.order = append(k.order, knownName{id, e.gen})
	}
	e.kn = kn
	k.held += len(kn.Openers) + knownCost
	k.packets[id] = e
	for k.held > k.limit && len(k.order) > 0 {
		oldest := k.order[0]
		k.order = k.order[1:]
		if e, ok := k.packets[oldest.id]; ok && e.gen == oldest.gen {
			k.held -= len(e.kn.Openers) + knownCost
			delete(k.packets, oldest.id)
		}
	}
}

// learnSent records a packet this server just created: nobody can have a
// share before the send answers. A send that found its packet created
// before (a retried send, maybe on another server) teaches nothing.
func (k *known) learnSent(p *hongbao.Packet, created bool, now time.Time) {
	k.mu.RLock()
	_, ok := k.packets[p.ID]
	k.mu.RUnlock()
	if created && !ok && p.RemainingCount == p.Count {
		k.learn(p.ID, store.Batch{Packet: p, Openers: map[hongbao.UserID]int64{}}, now)
	}
}

// forget drops what is known of id.
func (k *known) forget(id hongbao.PacketID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.packets[id]
	if !ok {
		return
	}
	k.held -= len(e.kn.Openers) + knownCost
	delete(k.packets, id)
	if len(k.order) > 2*len(k.packets)+64 { // drop the names of forgotten packets
		k.order = slices.DeleteFunc(k.order, func(n knownName) bool { return k.packets[n.id].gen != n.gen })
	}
}

// follow records which buckets the SET owns: the packets of a bucket that
// left are forgotten, and nothing is learnt of them until it is back, so a
// bucket that returns starts from MySQL (meanwhile its packets may have
// changed on another SET).
func (k *known) follow(owns func(hongbao.Bucket) bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	left := false
	for b := range k.away {
		away := !owns(hongbao.Bucket(b))
		left = left || away && !k.away[b]
		k.away[b] = away
	}
	if !left {
		return
	}
	for id, e := range k.packets {
		if k.away[id.Bucket()] {
			k.held -= len(e.kn.Openers) + knownCost
			delete(k.packets, id)
		}
	}
	k.order = slices.DeleteFunc(k.order, func(n knownName) bool { return k.packets[n.id].gen != n.gen })
}

// size returns the packets known.
func (k *known) size() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.packets)
}
