package store_test

// Integration tests of stale knowledge: a known packet changed, closed,
// purged, dropped or fenced away since the caller learnt it never commits
// from the knowledge; the retry reads it.

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// staleFixture is one scenario of TestKnownStale: a SET owning three buckets, the
// packet whose knowledge goes stale (p, bucket 0), a healthy known packet
// (h, bucket 1) and a packet opened without knowledge (u, bucket 2).
type staleFixture struct {
	db        *sql.DB
	set       string
	st        *store.Store // the store under test, drawing from rnd
	elsewhere *store.Store // another server of the same SET
	rnd       *drawSource
	p, h, u   hongbao.PacketID
	known     map[hongbao.PacketID]*hongbao.Snapshot
	// k1, k2 opened p before the knowledge was taken, n1, n2 are new, x
	// opens p elsewhere after it.
	k1, k2, n1, n2, x hongbao.UserID
}

// newStaleFixture creates a scenario: p of spec (in a day table of its own when
// ownDay, so that it can be dropped), opened by k1 and k2, and h and u
// opened once each, with the knowledge of p and h that transaction left.
func newStaleFixture(t *testing.T, db *sql.DB, loc *time.Location, spec packetSpec, ownDay bool) *staleFixture {
	t.Helper()
	ctx := context.Background()
	f := &staleFixture{db: db, set: dbtest.UniqueName("km"), rnd: newDrawSource(1), known: map[hongbao.PacketID]*hongbao.Snapshot{}}
	bs := randomBuckets(3)
	dbtest.Own(t, db, f.set, bs)
	f.st = store.New(db, f.set, loc, time.Now, f.rnd.intn)
	f.elsewhere = store.New(db, f.set, loc, time.Now, rand.Int64N)
	f.k1, f.k2, f.n1, f.n2, f.x = dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
	if ownDay {
		// A day of January 2025 no table exists for yet; the packet lives
		// an hour past now.
		f.p = missingDayTable(t, db)
		for slices.Contains(bs, f.p.Bucket()) {
			f.p = missingDayTable(t, db)
		}
		dbtest.Own(t, db, f.set, []hongbao.Bucket{f.p.Bucket()})
		_, created, err := f.st.Create(ctx, store.NewPacket{ID: f.p, Sender: dbtest.FreshUser(),
			Req:    hongbao.SendRequest{Total: spec.total, Count: spec.count, Type: spec.typ},
			Expiry: time.Since(f.p.Time()) + time.Hour, Funding: hongbao.Funded})
		if err != nil || !created {
			t.Fatalf("create %s in a day table of its own: created %v, %v", f.p, created, err)
		}
	} else {
		f.p = createPacket(t, f.st, bs[0], spec, hongbao.Funded)
	}
	f.h = createPacket(t, f.st, bs[1], packetSpec{hongbao.Random, 900, 9}, hongbao.Funded)
	f.u = createPacket(t, f.st, bs[2], packetSpec{hongbao.Fixed, 600, 6}, hongbao.Funded)
	got, err := f.st.OpenMany(ctx, []store.Work{
		{ID: f.p, Users: []hongbao.UserID{f.k1, f.k2}, OpenersUpTo: 1000},
		{ID: f.h, Users: []hongbao.UserID{dbtest.FreshUser()}, OpenersUpTo: 1000},
		{ID: f.u, Users: []hongbao.UserID{dbtest.FreshUser()}, OpenersUpTo: 1000},
	})
	if err != nil {
		t.Fatalf("first opens: %v", err)
	}
	f.known[f.p], f.known[f.h] = learn(t, got[0]), learn(t, got[1])
	return f
}

// openElsewhere opens p for users through the other server.
func (f *staleFixture) openElsewhere(t *testing.T, users ...hongbao.UserID) {
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
		spec   packetSpec
		ownDay bool
		stale  func(t *testing.T, f *staleFixture)
		users  func(f *staleFixture) []hongbao.UserID // p's work
		// wrongSet: the call fails with ErrWrongSet and writes nothing;
		// moving: p's bucket is being moved away (Disown not committed)
		// while the call runs.
		wrongSet, moving bool
		refused          bool // the store must not use the knowledge at all: no attempt
	}
	sqlStale := func(q func(f *staleFixture) (string, []any)) func(t *testing.T, f *staleFixture) {
		return func(t *testing.T, f *staleFixture) {
			t.Helper()
			s, args := q(f)
			if _, err := f.db.ExecContext(ctx, s, args...); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	newcomers := func(f *staleFixture) []hongbao.UserID { return []hongbao.UserID{f.k1, f.n1, f.n2} }
	kinds := []kind{
		{name: "opened elsewhere", spec: packetSpec{hongbao.Random, 1000, 10},
			stale: func(t *testing.T, f *staleFixture) { f.openElsewhere(t, dbtest.FreshUser(), dbtest.FreshUser()) },
			users: newcomers},
		{name: "sold out elsewhere", spec: packetSpec{hongbao.Random, 500, 4},
			stale: func(t *testing.T, f *staleFixture) { f.openElsewhere(t, dbtest.FreshUser(), dbtest.FreshUser()) },
			users: func(f *staleFixture) []hongbao.UserID { return []hongbao.UserID{f.n1, f.k2, f.n2} }},
		{name: "a user of the work opened elsewhere", spec: packetSpec{hongbao.Random, 1000, 10},
			stale: func(t *testing.T, f *staleFixture) { f.openElsewhere(t, dbtest.FreshUser(), f.x) },
			users: func(f *staleFixture) []hongbao.UserID { return []hongbao.UserID{f.n1, f.x, f.k1, f.x} }},
		{name: "a user of the work opened elsewhere, packet as known", spec: packetSpec{hongbao.Fixed, 1000, 10},
			// The knowledge has the packet as MySQL has it but misses x's
			// share: the conditional update alone would match, so the
			// store refuses openers that do not add up to the packet's
			// shares and reads it.
			refused: true,
			stale: func(t *testing.T, f *staleFixture) {
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
			users: func(f *staleFixture) []hongbao.UserID { return []hongbao.UserID{f.n1, f.x} }},
		{name: "remaining changed without a share", spec: packetSpec{hongbao.Random, 1000, 10},
			// An operator took 10 fen and a share off the packet: no
			// share was added, so no key of the details is hit and only
			// the conditional update catches the knowledge.
			stale: sqlStale(func(f *staleFixture) (string, []any) {
				pt, _ := dbtest.Tables(t, f.p)
				return "UPDATE " + pt + " SET total = total - 10, remaining_amount = remaining_amount - 10, count = count - 1," +
					" remaining_count = remaining_count - 1 WHERE id = ?", []any{f.p}
			}),
			users: newcomers},
		{name: "closed", spec: packetSpec{hongbao.Random, 1000, 10},
			stale: sqlStale(func(f *staleFixture) (string, []any) {
				pt, _ := dbtest.Tables(t, f.p)
				return "UPDATE " + pt + " SET closed = 1 WHERE id = ?", []any{f.p}
			}),
			users: newcomers},
		{name: "bucket deleted from the fence", spec: packetSpec{hongbao.Random, 1000, 10}, wrongSet: true,
			stale: sqlStale(func(f *staleFixture) (string, []any) {
				return "DELETE FROM hb_fence.owned WHERE set_name = ? AND bucket = ?", []any{f.set, int(f.p.Bucket())}
			}),
			users: newcomers},
		{name: "bucket owned by another SET", spec: packetSpec{hongbao.Fixed, 1000, 10}, wrongSet: true,
			stale: func(t *testing.T, f *staleFixture) {
				other := dbtest.UniqueName("km")
				t.Cleanup(func() { _, _ = f.db.Exec("DELETE FROM hb_fence.owned WHERE set_name = ?", other) })
				sqlStale(func(f *staleFixture) (string, []any) {
					return "UPDATE hb_fence.owned SET set_name = ? WHERE set_name = ? AND bucket = ?", []any{other, f.set, int(f.p.Bucket())}
				})(t, f)
			},
			users: newcomers},
		{name: "bucket moving away", spec: packetSpec{hongbao.Random, 1000, 10}, wrongSet: true, moving: true,
			stale: func(*testing.T, *staleFixture) {}, users: newcomers},
		{name: "row purged", spec: packetSpec{hongbao.Random, 1000, 10},
			stale: func(t *testing.T, f *staleFixture) {
				pt, dt := dbtest.Tables(t, f.p)
				for _, q := range []string{"DELETE FROM " + dt + " WHERE packet_id = ?", "DELETE FROM " + pt + " WHERE id = ?"} {
					if _, err := f.db.ExecContext(ctx, q, f.p); err != nil {
						t.Fatal(err)
					}
				}
			},
			users: newcomers},
		{name: "day table dropped", spec: packetSpec{hongbao.Random, 1000, 10}, ownDay: true,
			stale: func(t *testing.T, f *staleFixture) {
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
				f := newStaleFixture(t, db, loc, k.spec, k.ownDay)
				k.stale(t, f)
				ids := []hongbao.PacketID{f.p}
				works := []store.Work{{ID: f.p, Users: k.users(f), OpenersUpTo: 1000, Known: markKnown(f.known[f.p])}}
				if merged {
					ids = append(ids, f.h, f.u)
					works = append([]store.Work{{ID: f.h, Users: []hongbao.UserID{f.n1, f.n2, f.n1}, OpenersUpTo: 1000, Known: markKnown(f.known[f.h])}},
						works[0], store.Work{ID: f.u, Users: []hongbao.UserID{f.n2, f.k1}, OpenersUpTo: 1000})
				}
				pi := map[hongbao.PacketID]int{f.p: 0, f.h: 1, f.u: 2}
				truth := map[hongbao.PacketID]*packetState{}
				credits := map[hongbao.PacketID]map[hongbao.UserID][]int64{}
				for _, id := range ids {
					truth[id] = readState(t, db, id)
					credits[id] = dbtest.OutboxCredits(t, db, id)
				}
				before := map[hongbao.PacketID]*packetState{}
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
				var attempt, retry []modelWork
				for _, w := range works {
					st := truth[w.ID].clone()
					if w.Known != nil {
						st = believedState(w.Known)
					}
					attempt = append(attempt, modelWork{pi[w.ID], st, w.Users})
					retry = append(retry, modelWork{pi[w.ID], truth[w.ID], w.Users})
				}
				if !k.refused {
					applyModel(intn, attempt)
				}
				var want []string
				if !k.wrongSet {
					want = applyModel(intn, retry)
				}

				var (
					got []store.Batch
					err error
				)
				if k.moving {
					// A move of p's bucket has begun (its fence row deleted
					// in a transaction still open): the attempt fails at
					// once with ErrMoving, writing nothing, instead of
					// holding its transaction, and every other packet in
					// it, for the freeze; once the move commits the bucket
					// is gone.
					tx, txErr := db.BeginTx(ctx, nil)
					if txErr != nil {
						t.Fatal(txErr)
					}
					defer tx.Rollback() //nolint:errcheck // a no-op after Commit
					if err := fence.Disown(ctx, tx, f.set, []hongbao.Bucket{f.p.Bucket()}); err != nil {
						t.Fatal(err)
					}
					began := time.Now()
					frozen, ferr := f.st.OpenMany(ctx, works)
					if !errors.Is(ferr, hongbao.ErrMoving) || frozen != nil || time.Since(began) > time.Second {
						t.Errorf("OpenMany during the freeze = %d batches, %v after %v; want ErrMoving at once", len(frozen), ferr, time.Since(began))
					}
					if err := tx.Commit(); err != nil {
						t.Fatal(err)
					}
					got, err = f.st.OpenMany(ctx, works)
				} else {
					got, err = f.st.OpenMany(ctx, works)
				}

				// (A frozen bucket's attempt drew its shares before its
				// write failed: the draws are one attempt ahead then.)
				if next, want := f.rnd.intn(1<<40), intn(1<<40); next != want && !k.moving {
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
						lines = append(lines, printBatch(t, pi[works[i].ID], works[i], b)...)
					}
					if !slices.Equal(lines, want) {
						t.Errorf("outcomes: %s\ngot  %v\nwant %v", diffLines(lines, want), lines, want)
					}
				}
				for _, id := range ids {
					after := readState(t, db, id)
					wantState := truth[id]
					if k.wrongSet {
						wantState = before[id]
					}
					if !sameState(after, wantState) {
						t.Errorf("packet p%d in MySQL: %v, want %v", pi[id], after, wantState)
					}
					if after.missing || k.wrongSet {
						if c := dbtest.OutboxCredits(t, db, id); !maps.EqualFunc(c, credits[id], slices.Equal) {
							t.Errorf("packet p%d: outbox credits %v, before the call %v", pi[id], c, credits[id])
						}
						continue
					}
					checkCredits(t, db, dbtest.CheckPacket(t, db, id))
				}
				for i, b := range got {
					id := works[i].ID
					switch {
					case truth[id].missing && (b.Packet != nil || b.Openers != nil):
						t.Errorf("packet p%d is gone, batch says %+v", pi[id], b)
					case truth[id].missing:
					case b.Packet.Greeting == knownMarker && (!k.refused || id == f.p):
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
