package store_test

// Integration tests of OpenMany's fast path for known packets (Work.Known):
// a work carrying what the caller's last transaction left of its packet is
// applied without the locking read and the share read, in one compound
// write that fails when the knowledge has gone stale, after which OpenMany
// applies every work again from what MySQL holds. They run against test SET
// a's MariaDB (dbtest.DB) and reuse the helpers of openmany_test.go.

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
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/dbtest"
)

// kmMarker is the greeting the tests put in the packet of every Known they
// pass: the batch of a work applied from its knowledge carries the known
// packet, so the marker comes back; a work whose transaction read the
// packet (the slow path, or the retry after stale knowledge) carries the
// greeting MySQL holds (none: the tests create packets without one).
const kmMarker = "known-marker"

// kmMark returns a copy of k whose packet carries kmMarker.
func kmMark(k *hongbao.Snapshot) *hongbao.Snapshot {
	if k == nil {
		return nil
	}
	c := *k
	c.Packet.Greeting = kmMarker
	return &c
}

// kmUsable reports whether the store applies a work from k: only while
// the known packet takes opens (a sold-out or expired one is read).
func kmUsable(k *hongbao.Snapshot) bool {
	return k != nil && k.Packet.StatusAt(time.Now()) == hongbao.Active
}

// kmLearn returns the knowledge a batch gives, as a server keeps it.
func kmLearn(t *testing.T, b store.Batch) *hongbao.Snapshot {
	t.Helper()
	if b.Packet == nil || b.Openers == nil {
		t.Fatalf("batch without packet or openers to learn from: %+v", b)
	}
	return &hongbao.Snapshot{Packet: *b.Packet, Openers: b.Openers}
}

// kmRand is a store's source of draws that a test can reseed before a
// call, so that a model drawing from seeded(seed) stays in step with it; it
// counts the draws.
type kmRand struct {
	mu    sync.Mutex
	r     *rand.Rand
	calls int
}

func newKmRand(seed uint64) *kmRand {
	k := &kmRand{}
	k.reset(seed)
	return k
}

// reset restarts the draws as seeded(seed) does.
func (k *kmRand) reset(seed uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.r = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func (k *kmRand) intn(n int64) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls++
	return k.r.Int64N(n)
}

func (k *kmRand) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls
}

// kmState is the model of one packet: what is left, whether it was closed
// or is gone, and every share.
type kmState struct {
	typ     hongbao.Type
	amount  int64
	count   int
	closed  bool
	missing bool
	have    map[hongbao.UserID]int64
}

func (s *kmState) clone() *kmState {
	c := *s
	c.have = maps.Clone(s.have)
	return &c
}

func (s *kmState) String() string {
	if s.missing {
		return "missing"
	}
	return fmt.Sprintf("%d/%d closed=%v shares=%v", s.amount, s.count, s.closed, s.have)
}

// kmTruth reads packet id from MySQL into the model.
func kmTruth(t *testing.T, db *sql.DB, id hongbao.PacketID) *kmState {
	t.Helper()
	p := dbtest.ReadPacket(t, db, id)
	if p == nil {
		return &kmState{missing: true}
	}
	pt, _ := dbtest.Tables(t, id)
	closed := dbtest.Count(t, db, "SELECT closed FROM "+pt+" WHERE id = ?", id) != 0
	return &kmState{typ: hongbao.Type(p.Type), amount: p.RemainingAmount, count: p.RemainingCount, closed: closed, have: p.Shares}
}

// kmBelief is the model of what k says of its packet.
func kmBelief(k *hongbao.Snapshot) *kmState {
	return &kmState{typ: k.Packet.Type, amount: k.Packet.RemainingAmount, count: k.Packet.RemainingCount,
		closed: k.Packet.Closed, have: maps.Clone(k.Openers)}
}

// kmWork is a work of the model on packet number pi.
type kmWork struct {
	pi    int
	st    *kmState
	users []hongbao.UserID
}

// kmApply applies works in order to their states as the store decides one
// open at a time (have, then sold out, then closed, then a draw) and prints
// the outcomes as omPrintBatch does.
func kmApply(intn func(int64) int64, works []kmWork) []string {
	var out []string
	for _, w := range works {
		line := func(format string, a ...any) {
			out = append(out, fmt.Sprintf("p%d ", w.pi)+fmt.Sprintf(format, a...))
		}
		s := w.st
		if s.missing {
			for _, u := range w.users {
				line("%s:not_found", u)
			}
			line("no packet")
			continue
		}
		for _, u := range w.users {
			if a, ok := s.have[u]; ok {
				line("%s:%s:%d", u, hongbao.AlreadyOpened, a)
				continue
			}
			if s.count == 0 {
				line("%s:sold_out", u)
				continue
			}
			if s.closed {
				line("%s:expired", u)
				continue
			}
			a := hongbao.Draw(s.typ, s.amount, s.count, intn)
			s.amount -= a
			s.count--
			s.have[u] = a
			line("%s:%s:%d", u, hongbao.Opened, a)
		}
		line("left %d/%d", s.amount, s.count)
	}
	return out
}

// kmSameState reports how the packet in MySQL differs from the model.
func kmSameState(got, want *kmState) bool {
	if got.missing || want.missing {
		return got.missing == want.missing
	}
	return got.amount == want.amount && got.count == want.count && got.closed == want.closed && maps.Equal(got.have, want.have)
}

// kmCount counts packet id's detail rows and outbox credits.
func kmCount(t *testing.T, db *sql.DB, id hongbao.PacketID) (details, credits int) {
	t.Helper()
	_, dt := dbtest.Tables(t, id)
	details = dbtest.Count(t, db, "SELECT COUNT(*) FROM "+dt+" WHERE packet_id = ?", id)
	credits = dbtest.Count(t, db, "SELECT COUNT(*) FROM hb_set.outbox WHERE packet_id = ?", id)
	return details, credits
}

// TestKnownMatchesUnknown proves rounds applied with the last batch's knowledge give exactly the outcomes, openers and rows of rounds applied without it, never retrying.
func TestKnownMatchesUnknown(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := omSetup(t, 3)
	specs := []omSpec{
		{hongbao.Random, 1000, 10},
		{hongbao.Fixed, 300, 3},
		{hongbao.Random, 5, 3},
		{hongbao.Random, 777, 7},
		{hongbao.Fixed, 100, 1},
		{hongbao.Random, 3, 3},
		{hongbao.Fixed, 800, 8},
		{hongbao.Random, 50000, 200},
	}
	mixed, knownSoldOut, knownWorks := false, false, 0
	for seed := uint64(21); seed <= 23; seed++ {
		rounds := omRounds(seed, len(specs))
		want, model := omModelRun(seed, specs, rounds)
		type run struct {
			lines   []string
			openers []map[hongbao.UserID]int64
			packets []hongbao.Packet
		}
		runs := map[string]*run{}
		for _, mode := range []string{"unknown", "known"} {
			r := &run{}
			runs[mode] = r
			st := store.New(db, set, loc, time.Now, seeded(seed))
			ids := make([]hongbao.PacketID, len(specs))
			for i, sp := range specs {
				ids[i] = omCreate(t, st, buckets[i%len(buckets)], sp, hongbao.Funded)
			}
			knowledge := map[int]*hongbao.Snapshot{}
			for ri, round := range rounds {
				works := make([]store.Work, len(round))
				nknown := 0
				for i, w := range round {
					works[i] = store.Work{ID: ids[w.pkt], Users: w.users, OpenersUpTo: 1000}
					if mode == "known" && knowledge[w.pkt] != nil {
						works[i].Known = kmMark(knowledge[w.pkt])
						nknown++
						knownSoldOut = knownSoldOut || knowledge[w.pkt].Packet.RemainingCount == 0
					}
				}
				knownWorks += nknown
				mixed = mixed || nknown > 0 && nknown < len(works)
				bs, err := st.OpenMany(ctx, works)
				if err != nil {
					t.Fatalf("seed %d %s round %d: OpenMany: %v", seed, mode, ri, err)
				}
				if len(bs) != len(works) {
					t.Fatalf("seed %d %s: %d batches for %d works", seed, mode, len(bs), len(works))
				}
				for i, b := range bs {
					r.lines = append(r.lines, omPrintBatch(t, round[i].pkt, works[i], b)...)
					if b.Openers == nil {
						t.Errorf("seed %d %s round %d: packet p%d of %d shares: no openers with OpenersUpTo 1000",
							seed, mode, ri, round[i].pkt, specs[round[i].pkt].count)
					}
					r.openers = append(r.openers, b.Openers)
					r.packets = append(r.packets, *b.Packet)
					switch usable := kmUsable(works[i].Known); {
					case usable && b.Packet.Greeting != kmMarker:
						t.Errorf("seed %d %s round %d: packet p%d was known but its batch was read from MySQL (the knowledge attempt failed)",
							seed, mode, ri, round[i].pkt)
					case !usable && b.Packet.Greeting == kmMarker:
						t.Errorf("seed %d %s round %d: packet p%d no longer takes opens, yet was answered from knowledge",
							seed, mode, ri, round[i].pkt)
					}
					knowledge[round[i].pkt] = kmLearn(t, b)
				}
			}
			if !slices.Equal(r.lines, want) {
				t.Errorf("seed %d, %s: outcomes differ from one at a time: %s", seed, mode, omDiff(r.lines, want))
			}
			for i, id := range ids {
				p := dbtest.CheckPacket(t, db, id)
				m := model[i]
				if p.RemainingAmount != m.amount || p.RemainingCount != m.count || !slices.Equal(p.Details, m.shares) {
					t.Errorf("seed %d, %s: packet p%d: left %d/%d with shares %v, want %d/%d with %v",
						seed, mode, i, p.RemainingAmount, p.RemainingCount, p.Details, m.amount, m.count, m.shares)
				}
				if len(p.Shares) != len(p.Details) {
					t.Errorf("seed %d, %s: packet p%d: a user holds two shares: %v", seed, mode, i, p.Details)
				}
				omCheckCredits(t, db, p)
				// The last batch of the packet carried every share it has.
				if k := knowledge[i]; k != nil && !maps.Equal(k.Openers, p.Shares) {
					t.Errorf("seed %d, %s: packet p%d: last openers %v, MySQL %v", seed, mode, i, k.Openers, p.Shares)
				}
			}
		}
		u, k := runs["unknown"], runs["known"]
		for i := range min(len(u.openers), len(k.openers)) {
			if !maps.Equal(u.openers[i], k.openers[i]) {
				t.Errorf("seed %d: batch %d: openers known %v, read %v", seed, i, k.openers[i], u.openers[i])
			}
			pu, pk := u.packets[i], k.packets[i]
			if pu.Type != pk.Type || pu.Total != pk.Total || pu.Count != pk.Count || pu.RemainingAmount != pk.RemainingAmount ||
				pu.RemainingCount != pk.RemainingCount || pu.Closed != pk.Closed || pu.Funding != pk.Funding {
				t.Errorf("seed %d: batch %d: packet known %+v, read %+v", seed, i, pk, pu)
			}
		}
	}
	if !mixed || !knownSoldOut || knownWorks < 30 {
		t.Errorf("mixed call %v, sold-out packet known %v, %d known works: the rounds do not cover the fast path",
			mixed, knownSoldOut, knownWorks)
	}
}

// kmFix is one scenario of TestKnownStale: a SET owning three buckets, the
// packet whose knowledge goes stale (p, bucket 0), a healthy known packet
// (h, bucket 1) and a packet opened without knowledge (u, bucket 2).
type kmFix struct {
	db        *sql.DB
	set       string
	st        *store.Store // the store under test, drawing from rnd
	elsewhere *store.Store // another server of the same SET
	rnd       *kmRand
	p, h, u   hongbao.PacketID
	known     map[hongbao.PacketID]*hongbao.Snapshot
	// k1, k2 opened p before the knowledge was taken, n1, n2 are new, x
	// opens p elsewhere after it.
	k1, k2, n1, n2, x hongbao.UserID
}

// kmNewFix creates a scenario: p of spec (in a day table of its own when
// ownDay, so that it can be dropped), opened by k1 and k2, and h and u
// opened once each, with the knowledge of p and h that transaction left.
func kmNewFix(t *testing.T, db *sql.DB, loc *time.Location, spec omSpec, ownDay bool) *kmFix {
	t.Helper()
	ctx := context.Background()
	f := &kmFix{db: db, set: dbtest.UniqueName("km"), rnd: newKmRand(1), known: map[hongbao.PacketID]*hongbao.Snapshot{}}
	bs := omBuckets(3)
	dbtest.Own(t, db, f.set, bs)
	f.st = store.New(db, f.set, loc, time.Now, f.rnd.intn)
	f.elsewhere = store.New(db, f.set, loc, time.Now, rand.Int64N)
	f.k1, f.k2, f.n1, f.n2, f.x = dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
	if ownDay {
		// A day of January 2025 no table exists for yet; the packet lives
		// an hour past now.
		f.p = omMissingDayTable(t, db)
		for slices.Contains(bs, f.p.Bucket()) {
			f.p = omMissingDayTable(t, db)
		}
		dbtest.Own(t, db, f.set, []hongbao.Bucket{f.p.Bucket()})
		_, created, err := f.st.Create(ctx, store.NewPacket{ID: f.p, Sender: dbtest.FreshUser(),
			Req:    hongbao.SendRequest{Total: spec.total, Count: spec.count, Type: spec.typ},
			Expiry: time.Since(f.p.Time()) + time.Hour, Funding: hongbao.Funded})
		if err != nil || !created {
			t.Fatalf("create %s in a day table of its own: created %v, %v", f.p, created, err)
		}
	} else {
		f.p = omCreate(t, f.st, bs[0], spec, hongbao.Funded)
	}
	f.h = omCreate(t, f.st, bs[1], omSpec{hongbao.Random, 900, 9}, hongbao.Funded)
	f.u = omCreate(t, f.st, bs[2], omSpec{hongbao.Fixed, 600, 6}, hongbao.Funded)
	got, err := f.st.OpenMany(ctx, []store.Work{
		{ID: f.p, Users: []hongbao.UserID{f.k1, f.k2}, OpenersUpTo: 1000},
		{ID: f.h, Users: []hongbao.UserID{dbtest.FreshUser()}, OpenersUpTo: 1000},
		{ID: f.u, Users: []hongbao.UserID{dbtest.FreshUser()}, OpenersUpTo: 1000},
	})
	if err != nil {
		t.Fatalf("first opens: %v", err)
	}
	f.known[f.p], f.known[f.h] = kmLearn(t, got[0]), kmLearn(t, got[1])
	return f
}

// openElsewhere opens p for users through the other server.
func (f *kmFix) openElsewhere(t *testing.T, users ...hongbao.UserID) {
	t.Helper()
	bs, err := f.elsewhere.OpenMany(context.Background(), []store.Work{{ID: f.p, Users: users}})
	if err != nil {
		t.Fatalf("opens elsewhere: %v", err)
	}
	for i, o := range bs[0].Outcomes {
		if o.Err != nil || o.Result.Status != hongbao.Opened {
			t.Fatalf("open elsewhere of %s: %+v", users[i], o)
		}
	}
}

// TestKnownStale proves stale knowledge of every kind never commits: the retry gives the exact one-at-a-time answer (or wrong_set), alone and merged with healthy packets.
func TestKnownStale(t *testing.T) {
	ctx := context.Background()
	db := dbtest.DB(t, "a", 6)
	loc := dbtest.Shanghai(t)
	type kind struct {
		name   string
		spec   omSpec
		ownDay bool
		stale  func(t *testing.T, f *kmFix)
		users  func(f *kmFix) []hongbao.UserID // p's work
		// wrongSet: the call fails with ErrWrongSet and writes nothing;
		// moving: p's bucket is being moved away (Disown not committed)
		// while the call runs.
		wrongSet, moving bool
		refused          bool // the store must not use the knowledge at all: no attempt
	}
	sqlStale := func(q func(f *kmFix) (string, []any)) func(t *testing.T, f *kmFix) {
		return func(t *testing.T, f *kmFix) {
			t.Helper()
			s, args := q(f)
			if _, err := f.db.ExecContext(ctx, s, args...); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	newcomers := func(f *kmFix) []hongbao.UserID { return []hongbao.UserID{f.k1, f.n1, f.n2} }
	kinds := []kind{
		{name: "opened elsewhere", spec: omSpec{hongbao.Random, 1000, 10},
			stale: func(t *testing.T, f *kmFix) { f.openElsewhere(t, dbtest.FreshUser(), dbtest.FreshUser()) },
			users: newcomers},
		{name: "sold out elsewhere", spec: omSpec{hongbao.Random, 500, 4},
			stale: func(t *testing.T, f *kmFix) { f.openElsewhere(t, dbtest.FreshUser(), dbtest.FreshUser()) },
			users: func(f *kmFix) []hongbao.UserID { return []hongbao.UserID{f.n1, f.k2, f.n2} }},
		{name: "a user of the work opened elsewhere", spec: omSpec{hongbao.Random, 1000, 10},
			stale: func(t *testing.T, f *kmFix) { f.openElsewhere(t, dbtest.FreshUser(), f.x) },
			users: func(f *kmFix) []hongbao.UserID { return []hongbao.UserID{f.n1, f.x, f.k1, f.x} }},
		{name: "a user of the work opened elsewhere, packet as known", spec: omSpec{hongbao.Fixed, 1000, 10},
			// The knowledge has the packet as MySQL has it but misses x's
			// share: the conditional update alone would match, so the
			// store refuses openers that do not add up to the packet's
			// shares and reads it.
			refused: true,
			stale: func(t *testing.T, f *kmFix) {
				f.openElsewhere(t, f.x)
				p, _, err := f.st.Packet(ctx, f.p)
				if err != nil {
					t.Fatal(err)
				}
				f.known[f.p] = &hongbao.Snapshot{Packet: *p, Openers: f.known[f.p].Openers}
				if _, ok := f.known[f.p].Openers[f.x]; ok || p.RemainingCount != 7 {
					t.Fatalf("setup: knowledge %+v", f.known[f.p])
				}
			},
			users: func(f *kmFix) []hongbao.UserID { return []hongbao.UserID{f.n1, f.x} }},
		{name: "remaining changed without a share", spec: omSpec{hongbao.Random, 1000, 10},
			// An operator took 10 fen and a share off the packet: no
			// share was added, so no key of the details is hit and only
			// the conditional update catches the knowledge.
			stale: sqlStale(func(f *kmFix) (string, []any) {
				pt, _ := dbtest.Tables(t, f.p)
				return "UPDATE " + pt + " SET total = total - 10, remaining_amount = remaining_amount - 10, count = count - 1," +
					" remaining_count = remaining_count - 1 WHERE id = ?", []any{f.p}
			}),
			users: newcomers},
		{name: "closed", spec: omSpec{hongbao.Random, 1000, 10},
			stale: sqlStale(func(f *kmFix) (string, []any) {
				pt, _ := dbtest.Tables(t, f.p)
				return "UPDATE " + pt + " SET closed = 1 WHERE id = ?", []any{f.p}
			}),
			users: newcomers},
		{name: "bucket deleted from the fence", spec: omSpec{hongbao.Random, 1000, 10}, wrongSet: true,
			stale: sqlStale(func(f *kmFix) (string, []any) {
				return "DELETE FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", []any{f.set, int(f.p.Bucket())}
			}),
			users: newcomers},
		{name: "bucket owned by another SET", spec: omSpec{hongbao.Fixed, 1000, 10}, wrongSet: true,
			stale: func(t *testing.T, f *kmFix) {
				other := dbtest.UniqueName("km")
				t.Cleanup(func() { _, _ = f.db.Exec("DELETE FROM hb_fence.owned WHERE set_name = ?", other) })
				sqlStale(func(f *kmFix) (string, []any) {
					return "UPDATE hb_fence.owned SET set_name = ? WHERE set_name = ? AND bucket = ?", []any{other, f.set, int(f.p.Bucket())}
				})(t, f)
			},
			users: newcomers},
		{name: "bucket moving away", spec: omSpec{hongbao.Random, 1000, 10}, wrongSet: true, moving: true,
			stale: func(*testing.T, *kmFix) {}, users: newcomers},
		{name: "row purged", spec: omSpec{hongbao.Random, 1000, 10},
			stale: func(t *testing.T, f *kmFix) {
				pt, dt := dbtest.Tables(t, f.p)
				for _, q := range []string{"DELETE FROM " + dt + " WHERE packet_id = ?", "DELETE FROM " + pt + " WHERE id = ?"} {
					if _, err := f.db.ExecContext(ctx, q, f.p); err != nil {
						t.Fatal(err)
					}
				}
			},
			users: newcomers},
		{name: "day table dropped", spec: omSpec{hongbao.Random, 1000, 10}, ownDay: true,
			stale: func(t *testing.T, f *kmFix) {
				pt, dt := dbtest.Tables(t, f.p)
				if _, err := f.db.ExecContext(ctx, "DROP TABLE "+pt+", "+dt); err != nil {
					t.Fatal(err)
				}
			},
			users: newcomers},
	}
	for ki, k := range kinds {
		for _, merged := range []bool{false, true} {
			name := k.name + map[bool]string{false: ", alone", true: ", merged"}[merged]
			t.Run(name, func(t *testing.T) {
				f := kmNewFix(t, db, loc, k.spec, k.ownDay)
				k.stale(t, f)
				ids := []hongbao.PacketID{f.p}
				works := []store.Work{{ID: f.p, Users: k.users(f), OpenersUpTo: 1000, Known: kmMark(f.known[f.p])}}
				if merged {
					ids = append(ids, f.h, f.u)
					works = append([]store.Work{{ID: f.h, Users: []hongbao.UserID{f.n1, f.n2, f.n1}, OpenersUpTo: 1000, Known: kmMark(f.known[f.h])}},
						works[0], store.Work{ID: f.u, Users: []hongbao.UserID{f.n2, f.k1}, OpenersUpTo: 1000})
				}
				pi := map[hongbao.PacketID]int{f.p: 0, f.h: 1, f.u: 2}
				truth := map[hongbao.PacketID]*kmState{}
				credits := map[hongbao.PacketID]map[hongbao.UserID][]int64{}
				for _, id := range ids {
					truth[id] = kmTruth(t, db, id)
					credits[id] = dbtest.OutboxCredits(t, db, id)
				}
				before := map[hongbao.PacketID]*kmState{}
				for id, s := range truth {
					before[id] = s.clone()
				}

				// The model: the knowledge attempt draws for the known works
				// from what is believed, for the others from MySQL, then fails;
				// the retry reads everything and draws again (unless the SET
				// lost the bucket).
				seed := uint64(1000 + 2*ki)
				if merged {
					seed++
				}
				f.rnd.reset(seed)
				intn := seeded(seed)
				var attempt, retry []kmWork
				for _, w := range works {
					st := truth[w.ID].clone()
					if w.Known != nil {
						st = kmBelief(w.Known)
					}
					attempt = append(attempt, kmWork{pi[w.ID], st, w.Users})
					retry = append(retry, kmWork{pi[w.ID], truth[w.ID], w.Users})
				}
				if !k.refused {
					kmApply(intn, attempt)
				}
				var want []string
				if !k.wrongSet {
					want = kmApply(intn, retry)
				}

				var (
					got []store.Batch
					err error
				)
				if k.moving {
					// A move of p's bucket has begun: the fast attempt must wait
					// for it (its fence lock) and then find the bucket gone.
					tx, txErr := db.BeginTx(ctx, nil)
					if txErr != nil {
						t.Fatal(txErr)
					}
					defer tx.Rollback() //nolint:errcheck // a no-op after Commit
					if err := schema.Disown(ctx, tx, f.set, []hongbao.Bucket{f.p.Bucket()}); err != nil {
						t.Fatal(err)
					}
					done := make(chan struct{})
					go func() {
						defer close(done)
						got, err = f.st.OpenMany(ctx, works)
					}()
					select {
					case <-done:
						t.Errorf("OpenMany returned (%v) while the move of the bucket was not committed: it did not wait for the fence", err)
					case <-time.After(300 * time.Millisecond):
					}
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
					<-done
				} else {
					got, err = f.st.OpenMany(ctx, works)
				}

				if next, want := f.rnd.intn(1<<40), intn(1<<40); next != want {
					t.Errorf("the store did not make exactly one knowledge attempt and one retry: its draws are out of step with the model")
				}
				if k.wrongSet {
					if !errors.Is(err, hongbao.ErrWrongSet) || got != nil {
						t.Errorf("OpenMany = %d batches, %v; want wrong_set and no batch", len(got), err)
					}
				} else {
					if err != nil {
						t.Fatalf("OpenMany: %v", err)
					}
					if len(got) != len(works) {
						t.Fatalf("%d batches for %d works", len(got), len(works))
					}
					var lines []string
					for i, b := range got {
						lines = append(lines, omPrintBatch(t, pi[works[i].ID], works[i], b)...)
					}
					if !slices.Equal(lines, want) {
						t.Errorf("outcomes: %s\ngot  %v\nwant %v", omDiff(lines, want), lines, want)
					}
				}
				for _, id := range ids {
					after := kmTruth(t, db, id)
					wantState := truth[id]
					if k.wrongSet {
						wantState = before[id]
					}
					if !kmSameState(after, wantState) {
						t.Errorf("packet p%d in MySQL: %v, want %v", pi[id], after, wantState)
					}
					if after.missing || k.wrongSet {
						if c := dbtest.OutboxCredits(t, db, id); !maps.EqualFunc(c, credits[id], slices.Equal) {
							t.Errorf("packet p%d: outbox credits %v, before the call %v", pi[id], c, credits[id])
						}
						continue
					}
					omCheckCredits(t, db, dbtest.CheckPacket(t, db, id))
				}
				for i, b := range got {
					id := works[i].ID
					switch {
					case truth[id].missing && (b.Packet != nil || b.Openers != nil):
						t.Errorf("packet p%d is gone, batch says %+v", pi[id], b)
					case truth[id].missing:
					case b.Packet.Greeting == kmMarker && (!k.refused || id == f.p):
						// (refused knowledge fails nothing: the others' is used)
						t.Errorf("packet p%d: batch carries the stale knowledge's packet, not MySQL's", pi[id])
					case !maps.Equal(b.Openers, truth[id].have) || b.Openers == nil:
						t.Errorf("packet p%d: openers %v, MySQL %v", pi[id], b.Openers, truth[id].have)
					}
				}
			})
		}
	}
}

// TestKnownOpenersAnswer proves a user in Known.Openers of a live packet gets already_opened with that amount without any write or row lock, and that a sold-out or expired known packet is read instead, with the same answers.
func TestKnownOpenersAnswer(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := omSetup(t, 2)
	clock := &dbtest.Clock{}
	clock.Set(time.Now())
	st := store.New(db, set, loc, clock.Now, rand.Int64N)
	a, b, c, d, n := dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
	live := omCreate(t, st, buckets[0], omSpec{hongbao.Random, 1000, 10}, hongbao.Funded)
	soldOut := omCreate(t, st, buckets[1], omSpec{hongbao.Fixed, 200, 2}, hongbao.Funded)
	bs, err := st.OpenMany(ctx, []store.Work{
		{ID: live, Users: []hongbao.UserID{a, b}, OpenersUpTo: 100},
		{ID: soldOut, Users: []hongbao.UserID{c, d}, OpenersUpTo: 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	kLive, kSold := kmLearn(t, bs[0]), kmLearn(t, bs[1])
	if kSold.Packet.RemainingCount != 0 || len(kLive.Openers) != 2 {
		t.Fatalf("setup: knowledge %+v, %+v", kLive, kSold)
	}
	ao := func(u hongbao.UserID, amount int64) string {
		return fmt.Sprintf("%s:%s:%d", u, hongbao.AlreadyOpened, amount)
	}
	for _, tc := range []struct {
		name  string
		later time.Duration // the store's clock is this far ahead
		works []store.Work
		want  [][]string
	}{
		{"live", 0, []store.Work{{ID: live, Users: []hongbao.UserID{a, b, a}, OpenersUpTo: 100, Known: kmMark(kLive)}},
			[][]string{{ao(a, kLive.Openers[a]), ao(b, kLive.Openers[b]), ao(a, kLive.Openers[a])}}},
		{"sold out", 0, []store.Work{{ID: soldOut, Users: []hongbao.UserID{n, c}, OpenersUpTo: 100, Known: kmMark(kSold)}},
			[][]string{{n.String() + ":sold_out", ao(c, 100)}}},
		{"expired", 2 * time.Hour, []store.Work{{ID: live, Users: []hongbao.UserID{b, n}, OpenersUpTo: 100, Known: kmMark(kLive)}},
			[][]string{{ao(b, kLive.Openers[b]), n.String() + ":expired"}}},
		{"both packets", 0, []store.Work{
			{ID: soldOut, Users: []hongbao.UserID{d}, OpenersUpTo: 100, Known: kmMark(kSold)},
			{ID: live, Users: []hongbao.UserID{b}, OpenersUpTo: 100, Known: kmMark(kLive)}},
			[][]string{{ao(d, 100)}, {ao(b, kLive.Openers[b])}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			clock.Set(start.Add(tc.later))
			defer clock.Set(start)
			counts := map[hongbao.PacketID][2]int{}
			for _, id := range []hongbao.PacketID{live, soldOut} {
				dn, cn := kmCount(t, db, id)
				counts[id] = [2]int{dn, cn}
			}
			// Hold both packet rows: a transaction that read (or locked)
			// them would wait, and the call would run out of time.
			lock, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Rollback()                //nolint:errcheck // only locks
			reads := map[hongbao.PacketID]bool{} // no longer taking opens at the store's time: read
			for _, w := range tc.works {
				reads[w.ID] = w.Known.Packet.StatusAt(clock.Now()) != hongbao.Active
			}
			for _, id := range []hongbao.PacketID{live, soldOut} {
				if reads[id] || !slices.ContainsFunc(tc.works, func(w store.Work) bool { return w.ID == id }) {
					continue // the store must read it (or has no business with it)
				}
				pt, _ := dbtest.Tables(t, id)
				var got hongbao.PacketID
				if err := lock.QueryRowContext(ctx, "SELECT id FROM "+pt+" WHERE id = ? FOR UPDATE", id).Scan(&got); err != nil {
					t.Fatal(err)
				}
			}
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			bs, err := st.OpenMany(cctx, tc.works)
			if err != nil {
				t.Fatalf("OpenMany with the rows locked elsewhere: %v (it read or wrote the packets)", err)
			}
			_ = lock.Rollback()
			for i, w := range tc.works {
				var got []string
				for j, o := range bs[i].Outcomes {
					got = append(got, omOutcome(w.Users[j], o))
				}
				if !slices.Equal(got, tc.want[i]) {
					t.Errorf("work %d: outcomes %v, want %v", i, got, tc.want[i])
				}
				if bs[i].Packet == nil || (bs[i].Packet.Greeting == kmMarker) == reads[w.ID] || bs[i].Packet.RemainingCount != w.Known.Packet.RemainingCount {
					t.Errorf("work %d: packet %+v, want the known one (read from MySQL: %v)", i, bs[i].Packet, reads[w.ID])
				}
				if !maps.Equal(bs[i].Openers, w.Known.Openers) {
					t.Errorf("work %d: openers %v, known %v", i, bs[i].Openers, w.Known.Openers)
				}
			}
			for id, c := range counts {
				if dn, cn := kmCount(t, db, id); dn != c[0] || cn != c[1] {
					t.Errorf("packet %s: %d details and %d credits, %d and %d before: answering from knowledge wrote", id, dn, cn, c[0], c[1])
				}
			}
		})
	}

	// A known opener and a newcomer in one work: the opener is answered
	// from knowledge, the newcomer gets a share; exactly one row each.
	dn, cn := kmCount(t, db, live)
	bs, err = st.OpenMany(ctx, []store.Work{{ID: live, Users: []hongbao.UserID{a, n, n}, OpenersUpTo: 100, Known: kmMark(kLive)}})
	if err != nil {
		t.Fatal(err)
	}
	p := dbtest.CheckPacket(t, db, live)
	omCheckCredits(t, db, p)
	want := []string{ao(a, kLive.Openers[a]), fmt.Sprintf("%s:%s:%d", n, hongbao.Opened, p.Shares[n]), ao(n, p.Shares[n])}
	var got []string
	for j, o := range bs[0].Outcomes {
		got = append(got, omOutcome([]hongbao.UserID{a, n, n}[j], o))
	}
	if !slices.Equal(got, want) || bs[0].Packet.Greeting != kmMarker {
		t.Errorf("known opener and newcomer: %v (greeting %q), want %v from the knowledge", got, bs[0].Packet.Greeting, want)
	}
	if dn2, cn2 := kmCount(t, db, live); dn2 != dn+1 || cn2 != cn+1 || p.RemainingCount != 7 {
		t.Errorf("known opener and newcomer: details %d -> %d, credits %d -> %d, %d left; want one more each, 7 left", dn, dn2, cn, cn2, p.RemainingCount)
	}
	if wantOpeners := map[hongbao.UserID]int64{a: p.Shares[a], b: p.Shares[b], n: p.Shares[n]}; !maps.Equal(bs[0].Openers, wantOpeners) ||
		!maps.Equal(p.Shares, wantOpeners) {
		t.Errorf("openers %v, MySQL %v", bs[0].Openers, p.Shares)
	}
}

// TestKnownOpenersUpTo proves Batch.Openers is exactly the detail rows when Count <= OpenersUpTo (or sold out and <= SoldOutOpenersUpTo), else nil, with or without knowledge.
func TestKnownOpenersUpTo(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := omSetup(t, 2)
	type tcase struct {
		name           string
		sp             omSpec
		before, users  []int
		upTo, soldUpTo int
		want           bool
	}
	cases := []tcase{
		{"live, up to = count", omSpec{hongbao.Random, 500, 5}, []int{1}, []int{2}, 5, 0, true},
		{"live, up to > count", omSpec{hongbao.Random, 500, 5}, []int{1, 2}, []int{3}, 1000, 0, true},
		{"live, up to = count - 1", omSpec{hongbao.Random, 500, 5}, []int{1}, []int{2}, 4, 100, false},
		{"live, not asked", omSpec{hongbao.Random, 500, 5}, []int{1}, []int{2}, 0, 100, false},
		{"live, only repeats", omSpec{hongbao.Fixed, 500, 5}, []int{1, 2}, []int{2, 1}, 5, 0, true},
		{"live, no users", omSpec{hongbao.Random, 500, 5}, []int{1}, nil, 5, 0, true},
		{"no share yet, no users", omSpec{hongbao.Random, 500, 5}, nil, nil, 5, 0, true},
		{"sells out, up to = count", omSpec{hongbao.Random, 300, 3}, []int{1}, []int{2, 3, 4}, 3, 0, true},
		{"sells out, sold-out up to = count", omSpec{hongbao.Random, 300, 3}, []int{1}, []int{2, 3}, 2, 3, true},
		{"sells out, both < count", omSpec{hongbao.Random, 300, 3}, []int{1}, []int{2, 3}, 2, 2, false},
		{"sold out before, up to = count", omSpec{hongbao.Fixed, 200, 2}, []int{1, 2}, []int{3}, 2, 0, true},
		{"sold out before, both < count", omSpec{hongbao.Fixed, 200, 2}, []int{1, 2}, []int{3, 1}, 1, 1, false},
		{"large, up to > count", omSpec{hongbao.Random, 10000, 100}, []int{1, 2, 3}, []int{4, 5}, 1000, 0, true},
		{"large, up to < count", omSpec{hongbao.Random, 10000, 100}, []int{1, 2, 3}, []int{4, 5}, 99, 1000, false},
	}
	st := store.New(db, set, loc, time.Now, rand.Int64N)
	for _, mode := range []string{"unknown, alone", "known, alone", "known, together", "mixed, together"} {
		users := func(ns []int) []hongbao.UserID {
			var us []hongbao.UserID
			for _, n := range ns {
				us = append(us, hongbao.UserID(9000+n))
			}
			return us
		}
		works := make([]store.Work, len(cases))
		var first []store.Work
		for i, c := range cases {
			id := omCreate(t, st, buckets[i%len(buckets)], c.sp, hongbao.Funded)
			first = append(first, store.Work{ID: id, Users: users(c.before), OpenersUpTo: 1000})
			works[i] = store.Work{ID: id, Users: users(c.users), OpenersUpTo: c.upTo, SoldOutOpenersUpTo: c.soldUpTo}
		}
		bs, err := st.OpenMany(ctx, first)
		if err != nil {
			t.Fatalf("%s: first opens: %v", mode, err)
		}
		for i := range works {
			if mode != "unknown, alone" && (mode != "mixed, together" || i%2 == 0) {
				works[i].Known = kmMark(kmLearn(t, bs[i]))
			}
		}
		got := make([]store.Batch, len(works))
		if mode == "unknown, alone" || mode == "known, alone" {
			for i, w := range works {
				bs, err := st.OpenMany(ctx, []store.Work{w})
				if err != nil {
					t.Fatalf("%s: %s: %v", mode, cases[i].name, err)
				}
				got[i] = bs[0]
			}
		} else {
			bs, err := st.OpenMany(ctx, works)
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			copy(got, bs)
		}
		for i, c := range cases {
			b, w := got[i], works[i]
			p := dbtest.CheckPacket(t, db, w.ID)
			omCheckCredits(t, db, p)
			for j, o := range b.Outcomes {
				if o.Err == nil && p.Shares[w.Users[j]] != o.Result.Amount {
					t.Errorf("%s: %s: outcome %+v, MySQL share %d", mode, c.name, o.Result, p.Shares[w.Users[j]])
				}
			}
			switch usable := kmUsable(w.Known); {
			case usable && b.Packet.Greeting != kmMarker:
				t.Errorf("%s: %s: the knowledge attempt failed", mode, c.name)
			case !usable && b.Packet.Greeting == kmMarker:
				t.Errorf("%s: %s: a sold-out packet answered from knowledge", mode, c.name)
			}
			rows := map[hongbao.UserID]int64{}
			for _, s := range p.Details {
				rows[s.User] = s.Amount
			}
			switch {
			case !c.want && b.Openers != nil:
				t.Errorf("%s: %s: openers %v, want nil (%d shares, %d left, up to %d, sold out up to %d)",
					mode, c.name, b.Openers, c.sp.count, p.RemainingCount, c.upTo, c.soldUpTo)
			case c.want && b.Openers == nil:
				t.Errorf("%s: %s: openers nil, want the %d rows %v", mode, c.name, len(p.Details), rows)
			case c.want && (!maps.Equal(b.Openers, rows) || len(b.Openers) != len(p.Details)):
				t.Errorf("%s: %s: openers %v, rows %v", mode, c.name, b.Openers, p.Details)
			}
		}
	}
}

// TestKnownSamePacketTwice proves two works of one packet in a call, known or not, give the one-at-a-time outcomes and rows.
func TestKnownSamePacketTwice(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := omSetup(t, 1)
	for _, mode := range []string{"both known", "known then unknown", "unknown then known"} {
		rnd := newKmRand(7)
		st := store.New(db, set, loc, time.Now, rnd.intn)
		id := omCreate(t, st, buckets[0], omSpec{hongbao.Random, 1000, 6}, hongbao.Funded)
		a, b, c, d := dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
		bs, err := st.OpenMany(ctx, []store.Work{{ID: id, Users: []hongbao.UserID{a}, OpenersUpTo: 100}})
		if err != nil {
			t.Fatal(err)
		}
		k := kmMark(kmLearn(t, bs[0]))
		works := []store.Work{
			{ID: id, Users: []hongbao.UserID{b, a}, OpenersUpTo: 100, Known: k},
			{ID: id, Users: []hongbao.UserID{c, b, d}, OpenersUpTo: 100, Known: k},
		}
		switch mode {
		case "known then unknown":
			works[1].Known = nil
		case "unknown then known":
			works[0].Known = nil
		}
		truth := kmTruth(t, db, id)
		rnd.reset(99)
		bs, err = st.OpenMany(ctx, works)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		// Whatever attempts the store made, the committed outcomes are the
		// one-at-a-time ones against MySQL; with every work known there is
		// no retry, so the draws are exactly the model's.
		var lines []string
		for i, b := range bs {
			lines = append(lines, omPrintBatch(t, 0, works[i], b)...)
		}
		p := dbtest.CheckPacket(t, db, id)
		omCheckCredits(t, db, p)
		if mode == "both known" {
			want := kmApply(seeded(99), []kmWork{{0, truth, works[0].Users}, {0, truth, works[1].Users}})
			if !slices.Equal(lines, want) {
				t.Errorf("%s: %s", mode, omDiff(lines, want))
			}
		}
		// Shares answered are the rows; a, b, c, d hold one each.
		for i, b := range bs {
			for j, o := range b.Outcomes {
				u := works[i].Users[j]
				if o.Err != nil || p.Shares[u] != o.Result.Amount {
					t.Errorf("%s: work %d user %s: %+v, MySQL %d", mode, i, u, o, p.Shares[u])
				}
			}
			if !maps.Equal(b.Openers, p.Shares) {
				t.Errorf("%s: work %d: openers %v, MySQL %v", mode, i, b.Openers, p.Shares)
			}
		}
		if len(p.Shares) != 4 || p.RemainingCount != 2 {
			t.Errorf("%s: %d shares, %d left; want 4 and 2", mode, len(p.Shares), p.RemainingCount)
		}
		t.Logf("%s: %d draws for 3 new shares", mode, rnd.count()-1)
	}
}

// TestKnownConcurrentServers proves two servers with their own, stale-going knowledge of the same packets never double spend or answer a share MySQL does not hold.
func TestKnownConcurrentServers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	loc := dbtest.Shanghai(t)
	set := dbtest.UniqueName("km")
	buckets := omBuckets(3)
	type server struct {
		st    *store.Store
		rnd   *kmRand
		mu    sync.Mutex
		known map[hongbao.PacketID]*hongbao.Snapshot
	}
	var servers []*server
	for i := range 2 {
		db := dbtest.DB(t, "a", 8)
		if i == 0 {
			dbtest.Own(t, db, set, buckets)
		}
		rnd := newKmRand(uint64(time.Now().UnixNano()) + uint64(i))
		servers = append(servers, &server{st: store.New(db, set, loc, time.Now, rnd.intn), rnd: rnd, known: map[hongbao.PacketID]*hongbao.Snapshot{}})
	}
	db := dbtest.DB(t, "a", 2)
	specs := []omSpec{{hongbao.Random, 2000, 20}, {hongbao.Fixed, 3000, 30}, {hongbao.Random, 30000, 300}, {hongbao.Random, 500, 5},
		{hongbao.Random, 100000, 1000}, {hongbao.Fixed, 800, 8}}
	const npackets = 12
	ids := make([]hongbao.PacketID, npackets)
	typ := map[hongbao.PacketID]omSpec{}
	for i := range ids {
		ids[i] = omCreate(t, servers[i%2].st, buckets[i%len(buckets)], specs[i%len(specs)], hongbao.Funded)
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
	deadline := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			sv := servers[g%2]
			r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			for round := 0; round < 300 && time.Now().Before(deadline); round++ {
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
						works[i].Known = kmMark(k)
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
					if slices.ContainsFunc(bs, func(b store.Batch) bool { return b.Packet != nil && b.Packet.Greeting == kmMarker }) {
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
							if o.Result.Status == hongbao.AlreadyOpened && w.Known != nil && b.Packet.Greeting == kmMarker {
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
	omReport(t, failures)

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
		omCheckCredits(t, db, p)
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

// TestKnownNilOpeners: Known{Openers: nil} means a packet with no shares yet: it opens (a nil map once panicked in drawShares).
func TestKnownNilOpeners(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := omSetup(t, 1)
	st := store.New(db, set, loc, time.Now, rand.Int64N)
	id := omCreate(t, st, buckets[0], omSpec{hongbao.Fixed, 500, 5}, hongbao.Funded)
	p, _, err := st.Packet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	u := dbtest.FreshUser()
	var bs []store.Batch
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		bs, err = st.OpenMany(ctx, []store.Work{{ID: id, Users: []hongbao.UserID{u}, Known: &hongbao.Snapshot{Packet: *p}}})
	}()
	if err != nil {
		t.Fatalf("OpenMany with Known{Openers: nil} of a packet with no share: %v", err)
	}
	if o := bs[0].Outcomes[0]; o.Err != nil || o.Result.Status != hongbao.Opened || o.Result.Amount != 100 {
		t.Errorf("outcome %+v, want opened 100 fen", o)
	}
	omCheckCredits(t, db, dbtest.CheckPacket(t, db, id))
}

// TestKnownUsable: knowledge stands in for a read only for a funded packet
// taking opens whose openers add up to its shares.
func TestKnownUsable(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	base := hongbao.Packet{Count: 3, RemainingCount: 2, RemainingAmount: 200, Total: 300, ExpiresAt: now.Add(time.Hour), Funding: hongbao.Funded}
	one := map[hongbao.UserID]int64{7: 100}
	for _, tc := range []struct {
		name string
		edit func(k *hongbao.Snapshot)
		want bool
	}{
		{"live, openers add up", func(*hongbao.Snapshot) {}, true},
		{"an opener missing", func(k *hongbao.Snapshot) { k.Openers = map[hongbao.UserID]int64{} }, false},
		{"an opener too many", func(k *hongbao.Snapshot) { k.Openers = map[hongbao.UserID]int64{7: 100, 8: 1} }, false},
		{"pending funding", func(k *hongbao.Snapshot) { k.Packet.Funding = hongbao.Pending }, false},
		{"closed", func(k *hongbao.Snapshot) { k.Packet.Closed = true }, false},
		{"expired", func(k *hongbao.Snapshot) { k.Packet.ExpiresAt = now }, false},
		{"sold out", func(k *hongbao.Snapshot) {
			k.Packet.RemainingCount, k.Openers = 0, map[hongbao.UserID]int64{7: 100, 8: 100, 9: 100}
		}, false},
		{"fresh, no openers (nil)", func(k *hongbao.Snapshot) { k.Packet.RemainingCount, k.Openers = 3, nil }, true},
	} {
		k := &hongbao.Snapshot{Packet: base, Openers: maps.Clone(one)}
		tc.edit(k)
		if got := k.Usable(now); got != tc.want {
			t.Errorf("%s: Usable = %v, want %v", tc.name, got, tc.want)
		}
	}
	if (*hongbao.Snapshot)(nil).Usable(now) {
		t.Error("nil knowledge is usable")
	}
}
