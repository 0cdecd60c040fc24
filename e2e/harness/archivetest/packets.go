package archivetest

import (
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store"
)

// Packet is what the test knows of one packet it created.
type Packet struct {
	ID      hongbao.PacketID
	Total   int64
	Count   int
	Shares  []int64 // amounts opened, in order
	Funding hongbao.Funding
	Expiry  time.Duration
}

// Opened is the money of the shares opened.
func (p *Packet) Opened() int64 {
	var s int64
	for _, a := range p.Shares {
		s += a
	}
	return s
}

// Spec describes a packet to create.
type Spec struct {
	At        time.Time
	Bucket    hongbao.Bucket
	Total     int64
	Count     int
	Type      hongbao.Type     // "": random
	Opens     int              // shares opened a minute after At, each by a fresh user
	Expiry    time.Duration    // 0: 1h
	Pending   bool             // leave the debit undecided
	Cancelled bool             // debit voided: never openable
	Idem      string           // idempotency key
	Audience  hongbao.Audience // who may open it; the opens are its first users
}

// Create inserts a packet minted at s.At through the store and opens
// s.Opens shares a minute later, each for a fresh user; it fails the test
// unless every open gets a share.
func (f *Fixture) Create(s Spec) hongbao.PacketID {
	f.t.Helper()
	if s.Expiry == 0 {
		s.Expiry = time.Hour
	}
	if s.Type == "" {
		s.Type = hongbao.Random
	}
	f.mu.Lock()
	f.seq++
	seq := f.seq % 4096
	f.mu.Unlock()
	id, err := hongbao.NewPacketID(s.At, s.Bucket, seq)
	if err != nil {
		f.t.Fatal(err)
	}
	funding := hongbao.Funded
	if s.Pending || s.Cancelled {
		funding = hongbao.Pending
	}
	f.Clock.Set(s.At)
	p, created, err := f.Store.Create(f.Ctx, store.NewPacket{ID: id, Sender: f.newUser(), Expiry: s.Expiry, Funding: funding,
		IdempotencyKey: s.Idem, Req: hongbao.SendRequest{Total: s.Total, Count: s.Count, Type: s.Type, Greeting: "archive test", Audience: s.Audience}})
	if err != nil || !created || p.ID != id {
		f.t.Fatalf("create %s: created=%v err=%v", id, created, err)
	}
	pk := &Packet{ID: id, Total: s.Total, Count: s.Count, Funding: funding, Expiry: s.Expiry}
	if s.Cancelled {
		if _, err := f.Store.Fund(f.Ctx, id, hongbao.Cancelled); err != nil {
			f.t.Fatal(err)
		}
		pk.Funding = hongbao.Cancelled
	}
	if s.Opens > 0 {
		users := make([]hongbao.UserID, s.Opens)
		for i := range users {
			if s.Audience != nil {
				users[i] = s.Audience[i]
				continue
			}
			users[i] = f.newUser()
		}
		f.Clock.Set(s.At.Add(time.Minute))
		b, err := f.Store.OpenBatch(f.Ctx, id, users)
		if err != nil {
			f.t.Fatalf("open %s: %v", id, err)
		}
		for i, o := range b.Outcomes {
			if o.Err != nil || o.Result.Status != hongbao.Opened {
				f.t.Fatalf("open %s by user %d: %+v", id, i, o)
			}
			pk.Shares = append(pk.Shares, o.Result.Amount)
		}
	}
	f.mu.Lock()
	f.pk[id] = pk
	f.mu.Unlock()
	return id
}

func (f *Fixture) newUser() hongbao.UserID {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.user++
	return hongbao.UserID(f.user)
}

// Packet is the model of a packet created through f; nil for any other.
func (f *Fixture) Packet(id hongbao.PacketID) *Packet {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pk[id]
}

// Funded keeps the packets of ids that were funded (not left pending nor
// cancelled): those the settler closes and refunds.
func (f *Fixture) Funded(ids []hongbao.PacketID) []hongbao.PacketID {
	var out []hongbao.PacketID
	for _, id := range ids {
		if f.Packet(id).Funding == hongbao.Funded {
			out = append(out, id)
		}
	}
	return out
}

// ClosePackets closes packets a minute after their expiry (writing their
// refunds to the outbox).
func (f *Fixture) ClosePackets(ids ...hongbao.PacketID) {
	f.t.Helper()
	for _, id := range ids {
		f.Clock.Set(id.Time().Add(f.Packet(id).Expiry + time.Minute))
		if _, _, err := f.Store.Close(f.Ctx, id); err != nil {
			f.t.Fatal(err)
		}
	}
}

// Deliver deletes the outbox rows for which keep returns false (as the
// settler does once the wallet has them); nil delivers everything.
func (f *Fixture) Deliver(keep func(hongbao.Entry) bool) {
	f.t.Helper()
	rows, err := f.Store.Outbox(f.Ctx, 100000)
	if err != nil {
		f.t.Fatal(err)
	}
	var done []int64
	for _, r := range rows {
		if keep == nil || !keep(r.Entry) {
			done = append(done, r.ID)
		}
	}
	if err := f.Store.Delivered(f.Ctx, done); err != nil {
		f.t.Fatal(err)
	}
}

// Settle closes ids and delivers the whole outbox: their days become due.
func (f *Fixture) Settle(ids ...hongbao.PacketID) {
	f.t.Helper()
	f.ClosePackets(ids...)
	f.Deliver(nil)
}
