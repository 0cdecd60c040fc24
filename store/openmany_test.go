package store_test

// Integration tests of Store.OpenMany: several packets' opens in one MySQL
// transaction. They run against test SET a's MariaDB (dbtest.DB).

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
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/dbtest"
)

// omMinter mints the IDs of every packet these tests create: unique within
// the process, so no create of one test meets another's ID.
var omMinter = hongbao.NewMinter(time.Now)

// omSpec is a packet to create.
type omSpec struct {
	typ   hongbao.Type
	total int64
	count int
}

// omCreate creates a packet of spec in bucket b through st, with a fresh
// sender (so a colliding ID could never be replayed as this create).
func omCreate(t *testing.T, st *store.Store, b hongbao.Bucket, sp omSpec, funding hongbao.Funding) hongbao.PacketID {
	t.Helper()
	id, err := omMinter.Next(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, created, err := st.Create(ctx, store.NewPacket{ID: id, Sender: dbtest.FreshUser(),
		Req: hongbao.SendRequest{Total: sp.total, Count: sp.count, Type: sp.typ}, Expiry: time.Hour, Funding: funding})
	if err != nil {
		t.Fatalf("create %+v in bucket %d: %v", sp, b, err)
	}
	if !created {
		t.Fatalf("create %s: not created (ID taken)", id)
	}
	return id
}

// omSetup opens the test MySQL and makes a fresh SET own n fresh buckets.
func omSetup(t *testing.T, n int) (*sql.DB, *time.Location, string, []hongbao.Bucket) {
	t.Helper()
	db := dbtest.DB(t, "a", 4)
	set := dbtest.UniqueName("om")
	buckets := omBuckets(n)
	dbtest.Own(t, db, set, buckets)
	return db, dbtest.Shanghai(t), set, buckets
}

// omBuckets returns n distinct random buckets.
func omBuckets(n int) []hongbao.Bucket {
	var bs []hongbao.Bucket
	for _, i := range rand.Perm(hongbao.Buckets)[:n] {
		bs = append(bs, hongbao.Bucket(i))
	}
	return bs
}

// omOutcome prints the outcome of user u's open.
func omOutcome(u hongbao.UserID, o hongbao.Outcome) string {
	if o.Err != nil {
		return u.String() + ":" + hongbao.Code(o.Err)
	}
	if o.Result.User != u {
		return fmt.Sprintf("%s:answered-for-%s:%s:%d", u, o.Result.User, o.Result.Status, o.Result.Amount)
	}
	return fmt.Sprintf("%s:%s:%d", u, o.Result.Status, o.Result.Amount)
}

// omPrintBatch prints the batch of work w on packet number pi: one line per
// outcome, then what the batch says is left of the packet.
func omPrintBatch(t *testing.T, pi int, w store.Work, b store.Batch) []string {
	t.Helper()
	if len(b.Outcomes) != len(w.Users) {
		t.Fatalf("packet %s: %d outcomes for %d users", w.ID, len(b.Outcomes), len(w.Users))
	}
	var out []string
	for i, u := range w.Users {
		out = append(out, fmt.Sprintf("p%d %s", pi, omOutcome(u, b.Outcomes[i])))
	}
	switch {
	case b.Packet == nil:
		out = append(out, fmt.Sprintf("p%d no packet", pi))
	case b.Packet.ID != w.ID:
		t.Fatalf("batch of %s carries packet %s", w.ID, b.Packet.ID)
	default:
		out = append(out, fmt.Sprintf("p%d left %d/%d", pi, b.Packet.RemainingAmount, b.Packet.RemainingCount))
	}
	return out
}

// omWork is a work on packet number pkt of a test's list.
type omWork struct {
	pkt   int
	users []hongbao.UserID
}

// omRounds is a seeded list of rounds, each a list of works on distinct
// packets (of n) in random order; users come from a pool of 8 so some open
// again in later rounds and the small packets sell out, and some appear
// twice in one work (always in the very first work).
func omRounds(seed uint64, n int) [][]omWork {
	r := rand.New(rand.NewPCG(seed, 99))
	var rounds [][]omWork
	for round := range 7 {
		perm := r.Perm(n)
		var works []omWork
		for wi, pkt := range perm[:2+r.IntN(n-1)] {
			var us []hongbao.UserID
			for range 1 + r.IntN(4) {
				us = append(us, hongbao.UserID(100+r.IntN(8)))
			}
			if (round == 0 && wi == 0) || r.IntN(3) == 0 {
				dup := us[r.IntN(len(us))]
				at := r.IntN(len(us) + 1)
				us = slices.Insert(us, at, dup)
			}
			works = append(works, omWork{pkt: pkt, users: us})
		}
		rounds = append(rounds, works)
	}
	return rounds
}

// omModel is the reference: opening one at a time in memory with the
// domain's Draw and the same draw sequence.
type omModel struct {
	typ    hongbao.Type
	amount int64
	count  int
	have   map[hongbao.UserID]int64
	shares []dbtest.Share
}

func omModelRun(seed uint64, specs []omSpec, rounds [][]omWork) ([]string, []*omModel) {
	intn := seeded(seed)
	ms := make([]*omModel, len(specs))
	for i, sp := range specs {
		ms[i] = &omModel{typ: sp.typ, amount: sp.total, count: sp.count, have: map[hongbao.UserID]int64{}}
	}
	var out []string
	for _, round := range rounds {
		for _, w := range round {
			m := ms[w.pkt]
			for _, u := range w.users {
				if a, ok := m.have[u]; ok {
					out = append(out, fmt.Sprintf("p%d %s:%s:%d", w.pkt, u, hongbao.AlreadyOpened, a))
					continue
				}
				if m.count == 0 {
					out = append(out, fmt.Sprintf("p%d %s:sold_out", w.pkt, u))
					continue
				}
				a := hongbao.Draw(m.typ, m.amount, m.count, intn)
				m.amount -= a
				m.count--
				m.have[u] = a
				m.shares = append(m.shares, dbtest.Share{User: u, Amount: a, Seq: len(m.shares) + 1})
				out = append(out, fmt.Sprintf("p%d %s:%s:%d", w.pkt, u, hongbao.Opened, a))
			}
			out = append(out, fmt.Sprintf("p%d left %d/%d", w.pkt, m.amount, m.count))
		}
	}
	return out, ms
}

// omDiff reports the first line where got and want differ.
func omDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		g, w := "<none>", "<none>"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("line %d: got %q, want %q (%d lines vs %d)", i, g, w, len(got), len(want))
		}
	}
	return "equal"
}

// omCheckCredits asserts that the outbox holds exactly one credit per
// share of p, of the share's amount.
func omCheckCredits(t *testing.T, db *sql.DB, p *dbtest.Packet) {
	t.Helper()
	credits := dbtest.OutboxCredits(t, db, p.ID)
	want := map[hongbao.UserID][]int64{}
	for u, a := range p.Shares {
		want[u] = []int64{a}
	}
	if !maps.EqualFunc(credits, want, slices.Equal) {
		t.Errorf("packet %s: outbox credits %v, shares %v", p.ID, credits, p.Shares)
	}
}

// TestOpenManyMatchesSequential: with the same seeded draws, applying the
// works one OpenMany per round (several packets per transaction) and one
// OpenBatch per work in the same order give exactly the outcomes and the
// shares of opening one at a time in memory, including users twice in one
// work, users opening again in a later round and packets selling out in
// the middle of a transaction; and every packet's invariants hold.
func TestOpenManyMatchesSequential(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := omSetup(t, 2)
	specs := []omSpec{
		{hongbao.Random, 1000, 10},
		{hongbao.Fixed, 300, 3},
		{hongbao.Random, 5, 3},
		{hongbao.Random, 777, 7},
		{hongbao.Fixed, 100, 1},
		{hongbao.Random, 3, 3},
		{hongbao.Fixed, 800, 8},
	}
	for seed := uint64(1); seed <= 4; seed++ {
		rounds := omRounds(seed, len(specs))
		want, model := omModelRun(seed, specs, rounds)
		soldOutMidway := false
		for _, m := range model {
			soldOutMidway = soldOutMidway || m.count == 0
		}
		if !soldOutMidway {
			t.Fatalf("seed %d: no packet sells out: the test would not cover sold_out", seed)
		}
		for _, mode := range []string{"OpenMany per round", "OpenBatch per work"} {
			st := store.New(db, set, loc, time.Now, seeded(seed))
			ids := make([]hongbao.PacketID, len(specs))
			for i, sp := range specs {
				ids[i] = omCreate(t, st, buckets[i%len(buckets)], sp, hongbao.Funded)
			}
			var got []string
			for _, round := range rounds {
				works := make([]store.Work, len(round))
				for i, w := range round {
					works[i] = store.Work{ID: ids[w.pkt], Users: w.users}
				}
				if mode == "OpenMany per round" {
					bs, err := st.OpenMany(ctx, works)
					if err != nil {
						t.Fatalf("seed %d: OpenMany: %v", seed, err)
					}
					if len(bs) != len(works) {
						t.Fatalf("seed %d: %d batches for %d works", seed, len(bs), len(works))
					}
					for i, b := range bs {
						got = append(got, omPrintBatch(t, round[i].pkt, works[i], b)...)
					}
					continue
				}
				for i, w := range works {
					b, err := st.OpenBatch(ctx, w.ID, w.Users)
					if err != nil {
						t.Fatalf("seed %d: OpenBatch: %v", seed, err)
					}
					got = append(got, omPrintBatch(t, round[i].pkt, w, b)...)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("seed %d, %s: outcomes differ from one at a time: %s\ngot  %v\nwant %v",
					seed, mode, omDiff(got, want), got, want)
			}
			for i, id := range ids {
				p := dbtest.CheckPacket(t, db, id)
				m := model[i]
				if p.RemainingAmount != m.amount || p.RemainingCount != m.count || !slices.Equal(p.Details, m.shares) {
					t.Errorf("seed %d, %s: packet p%d %s: left %d/%d with shares %v, want %d/%d with %v",
						seed, mode, i, id, p.RemainingAmount, p.RemainingCount, p.Details, m.amount, m.count, m.shares)
				}
				omCheckCredits(t, db, p)
				sp, recs, err := st.Packet(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if sp.RemainingAmount != p.RemainingAmount || sp.RemainingCount != p.RemainingCount || len(recs) != len(p.Details) {
					t.Errorf("seed %d: Store.Packet(%s) says %d/%d with %d records, MySQL %d/%d with %d",
						seed, id, sp.RemainingAmount, sp.RemainingCount, len(recs), p.RemainingAmount, p.RemainingCount, len(p.Details))
				}
			}
		}
	}
}

// TestOpenManyOpeners: a work asking for the openers (SoldOutOpenersUpTo >=
// Count) gets exactly the packet's shares in MySQL when its transaction
// leaves the packet sold out, whether this transaction took the last
// share or the packet was sold out before; it gets nil when it asks for
// fewer than Count, not at all, or the packet still has shares. Each case
// runs alone, and all together in one transaction (in order and reversed).
func TestOpenManyOpeners(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := omSetup(t, 2)
	const (
		op = hongbao.Opened
		ao = hongbao.AlreadyOpened
		so = "sold_out"
	)
	type tcase struct {
		name    string
		sp      omSpec
		before  []int // users who opened in an earlier transaction
		users   []int
		upTo    int
		want    []string // status or error code per user
		openers bool
	}
	cases := []tcase{
		{"sells out, up to = count", omSpec{hongbao.Random, 300, 3}, nil, []int{1, 2, 2, 3, 4}, 3,
			[]string{op, op, ao, op, so}, true},
		{"sells out, up to > count", omSpec{hongbao.Fixed, 300, 3}, nil, []int{1, 2, 3}, 100,
			[]string{op, op, op}, true},
		{"sells out, up to < count", omSpec{hongbao.Random, 300, 3}, nil, []int{1, 2, 3, 4}, 2,
			[]string{op, op, op, so}, false},
		{"sells out, not asked", omSpec{hongbao.Random, 200, 2}, nil, []int{1, 2}, 0,
			[]string{op, op}, false},
		{"last share after earlier opens", omSpec{hongbao.Random, 500, 5}, []int{1, 2, 3, 4}, []int{4, 5, 6}, 5,
			[]string{ao, op, so}, true},
		{"sold out before, new user", omSpec{hongbao.Fixed, 300, 3}, []int{1, 2, 3}, []int{4}, 3,
			[]string{so}, true},
		{"sold out before, opener again", omSpec{hongbao.Random, 300, 3}, []int{1, 2, 3}, []int{2, 5}, 10,
			[]string{ao, so}, true},
		{"sold out before, up to < count", omSpec{hongbao.Random, 300, 3}, []int{1, 2, 3}, []int{4}, 2,
			[]string{so}, false},
		{"not sold out", omSpec{hongbao.Random, 500, 5}, []int{1}, []int{2, 3}, 10,
			[]string{op, op}, false},
		{"count 1", omSpec{hongbao.Fixed, 100, 1}, nil, []int{1, 1, 2}, 1,
			[]string{op, ao, so}, true},
	}
	user := func(n int) hongbao.UserID { return hongbao.UserID(7000 + n) }
	users := func(ns []int) []hongbao.UserID {
		var us []hongbao.UserID
		for _, n := range ns {
			us = append(us, user(n))
		}
		return us
	}
	for _, mode := range []string{"alone", "together", "together reversed"} {
		st := store.New(db, set, loc, time.Now, rand.Int64N)
		works := make([]store.Work, len(cases))
		var before []store.Work
		for i, c := range cases {
			id := omCreate(t, st, buckets[i%len(buckets)], c.sp, hongbao.Funded)
			works[i] = store.Work{ID: id, Users: users(c.users), SoldOutOpenersUpTo: c.upTo}
			if c.before != nil {
				before = append(before, store.Work{ID: id, Users: users(c.before), SoldOutOpenersUpTo: 0})
			}
		}
		bs, err := st.OpenMany(ctx, before)
		if err != nil {
			t.Fatalf("%s: opens before: %v", mode, err)
		}
		for i, b := range bs {
			if b.Openers != nil {
				t.Errorf("%s: opens before of %s, not asked for openers, got %v", mode, before[i].ID, b.Openers)
			}
		}
		got := make([]store.Batch, len(cases))
		switch mode {
		case "alone":
			for i, w := range works {
				bs, err := st.OpenMany(ctx, []store.Work{w})
				if err != nil {
					t.Fatalf("%s: %s: %v", mode, cases[i].name, err)
				}
				got[i] = bs[0]
			}
		case "together":
			bs, err := st.OpenMany(ctx, works)
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			copy(got, bs)
		case "together reversed":
			rev := slices.Clone(works)
			slices.Reverse(rev)
			bs, err := st.OpenMany(ctx, rev)
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			slices.Reverse(bs)
			copy(got, bs)
		}
		for i, c := range cases {
			b := got[i]
			var statuses []string
			for _, o := range b.Outcomes {
				if o.Err != nil {
					statuses = append(statuses, hongbao.Code(o.Err))
				} else {
					statuses = append(statuses, o.Result.Status)
				}
			}
			if !slices.Equal(statuses, c.want) {
				t.Errorf("%s: %s: outcomes %v, want %v", mode, c.name, statuses, c.want)
			}
			p := dbtest.CheckPacket(t, db, works[i].ID)
			// Every share the outcomes report is the one in MySQL.
			for j, o := range b.Outcomes {
				if o.Err == nil && (o.Result.User != works[i].Users[j] || p.Shares[o.Result.User] != o.Result.Amount) {
					t.Errorf("%s: %s: outcome %+v, MySQL share %d", mode, c.name, o.Result, p.Shares[works[i].Users[j]])
				}
			}
			switch {
			case !c.openers && b.Openers != nil:
				t.Errorf("%s: %s: Openers %v, want nil", mode, c.name, b.Openers)
			case c.openers && b.Openers == nil:
				t.Errorf("%s: %s: Openers nil, want the shares %v", mode, c.name, p.Shares)
			case c.openers && !maps.Equal(b.Openers, p.Shares):
				t.Errorf("%s: %s: Openers %v, MySQL shares %v", mode, c.name, b.Openers, p.Shares)
			}
			if c.openers && (p.RemainingCount != 0 || len(p.Shares) != c.sp.count) {
				t.Errorf("%s: %s: want a sold-out packet, MySQL has %d left, %d shares", mode, c.name, p.RemainingCount, len(p.Shares))
			}
		}
	}
}

// omMissingDayTable returns a packet ID of a day of January 2025 whose day
// table does not exist in db (nor was created by anyone so far). Day tables
// are named by day of month only, so the day is kept away from today's,
// whose tables the tests' creates make.
func omMissingDayTable(t *testing.T, db *sql.DB) hongbao.PacketID {
	t.Helper()
	loc := dbtest.Shanghai(t)
	existing := map[string]bool{}
	for _, name := range dbtest.DayTables(t, db) {
		existing[name] = true
	}
	today := time.Now().In(loc).Day()
	for range 1000 {
		b := hongbao.Bucket(rand.IntN(hongbao.Buckets))
		day := 1 + rand.IntN(31)
		if d := day - today; d >= -1 && d <= 1 || today >= 30 && day <= 2 || today <= 2 && day >= 30 {
			continue
		}
		id, err := hongbao.NewPacketID(time.Date(2025, 1, day, 12, 0, 0, 0, loc), b, rand.IntN(4096))
		if err != nil {
			t.Fatal(err)
		}
		packets, details := dbtest.Tables(t, id)
		if !existing[packets] && !dbtest.TableExists(t, db, packets) && !dbtest.TableExists(t, db, details) {
			return id
		}
	}
	t.Fatal("every day table sampled exists")
	return 0
}

// TestOpenManyNotFound: a packet with no row, a pending and a cancelled one
// answer not_found for each of their users while the other works of the
// same transaction open; a lone packet whose day table does not exist
// answers not_found outcomes (no error, no table created); merged with
// others, such a packet fails the transaction as documented (readErr) and
// nothing of it commits.
func TestOpenManyNotFound(t *testing.T) {
	ctx := context.Background()
	db := dbtest.DB(t, "a", 4)
	loc := dbtest.Shanghai(t)
	set := dbtest.UniqueName("om")
	missingTable := omMissingDayTable(t, db)
	buckets := append(omBuckets(1), missingTable.Bucket())
	if buckets[0] == buckets[1] {
		buckets = buckets[1:]
	}
	dbtest.Own(t, db, set, buckets)
	st := store.New(db, set, loc, time.Now, seeded(11))
	b := buckets[0]
	u := func(n int) hongbao.UserID { return hongbao.UserID(8000 + n) }

	t.Run("missing row and unfunded among others", func(t *testing.T) {
		a := omCreate(t, st, b, omSpec{hongbao.Random, 1000, 5}, hongbao.Funded)
		missing, err := omMinter.Next(b) // same bucket and day as a: the table exists
		if err != nil {
			t.Fatal(err)
		}
		pending := omCreate(t, st, b, omSpec{hongbao.Random, 500, 5}, hongbao.Pending)
		cancelled := omCreate(t, st, b, omSpec{hongbao.Fixed, 300, 3}, hongbao.Cancelled)
		fixed := omCreate(t, st, b, omSpec{hongbao.Fixed, 300, 3}, hongbao.Funded)
		works := []store.Work{
			{ID: a, Users: []hongbao.UserID{u(1), u(2)}, SoldOutOpenersUpTo: 100},
			{ID: missing, Users: []hongbao.UserID{u(1), u(2), u(3)}, SoldOutOpenersUpTo: 100},
			{ID: pending, Users: []hongbao.UserID{u(1)}, SoldOutOpenersUpTo: 100},
			{ID: fixed, Users: []hongbao.UserID{u(1), u(1), u(4)}, SoldOutOpenersUpTo: 100},
			{ID: cancelled, Users: []hongbao.UserID{u(2), u(5)}, SoldOutOpenersUpTo: 100},
		}
		bs, err := st.OpenMany(ctx, works)
		if err != nil {
			t.Fatalf("OpenMany: %v", err)
		}
		if len(bs) != len(works) {
			t.Fatalf("%d batches for %d works", len(bs), len(works))
		}
		var got []string
		for i, b := range bs {
			got = append(got, omPrintBatch(t, i, works[i], b)...)
			if b.Openers != nil {
				t.Errorf("work %d (%s): Openers %v on a packet not sold out", i, works[i].ID, b.Openers)
			}
		}
		pa := dbtest.CheckPacket(t, db, a)
		want := []string{
			fmt.Sprintf("p0 %s:opened:%d", u(1), pa.Shares[u(1)]),
			fmt.Sprintf("p0 %s:opened:%d", u(2), pa.Shares[u(2)]),
			fmt.Sprintf("p0 left %d/3", pa.RemainingAmount),
			"p1 " + u(1).String() + ":not_found", "p1 " + u(2).String() + ":not_found", "p1 " + u(3).String() + ":not_found",
			"p1 no packet",
			"p2 " + u(1).String() + ":not_found", "p2 no packet",
			"p3 " + u(1).String() + ":opened:100", "p3 " + u(1).String() + ":already_opened:100", "p3 " + u(4).String() + ":opened:100",
			"p3 left 100/1",
			"p4 " + u(2).String() + ":not_found", "p4 " + u(5).String() + ":not_found", "p4 no packet",
		}
		if !slices.Equal(got, want) {
			t.Errorf("outcomes: %s\ngot  %v\nwant %v", omDiff(got, want), got, want)
		}
		if len(pa.Shares) != 2 || pa.RemainingCount != 3 {
			t.Errorf("packet a: %d shares, %d left; want 2 and 3", len(pa.Shares), pa.RemainingCount)
		}
		omCheckCredits(t, db, pa)
		omCheckCredits(t, db, dbtest.CheckPacket(t, db, fixed))
		if p := dbtest.ReadPacket(t, db, missing); p != nil {
			t.Errorf("missing packet %s has a row: %+v", missing, p)
		}
		for _, id := range []hongbao.PacketID{pending, cancelled} {
			p := dbtest.CheckPacket(t, db, id)
			if len(p.Details) != 0 || p.RemainingAmount != p.Total || p.RemainingCount != p.Count {
				t.Errorf("unfunded packet %s was opened: %d shares, %d/%d left", id, len(p.Details), p.RemainingAmount, p.RemainingCount)
			}
			omCheckCredits(t, db, p)
		}
	})

	t.Run("day table missing, one packet", func(t *testing.T) {
		id := missingTable
		users := []hongbao.UserID{u(1), u(2), u(1)}
		bs, err := st.OpenMany(ctx, []store.Work{{ID: id, Users: users, SoldOutOpenersUpTo: 100}})
		if err != nil {
			t.Fatalf("OpenMany of %s (no day table): %v, want not_found outcomes", id, err)
		}
		if len(bs) != 1 {
			t.Fatalf("%d batches for 1 work", len(bs))
		}
		got := omPrintBatch(t, 0, store.Work{ID: id, Users: users}, bs[0])
		want := []string{"p0 " + u(1).String() + ":not_found", "p0 " + u(2).String() + ":not_found",
			"p0 " + u(1).String() + ":not_found", "p0 no packet"}
		if !slices.Equal(got, want) || bs[0].Openers != nil {
			t.Errorf("outcomes %v (openers %v), want %v", got, bs[0].Openers, want)
		}
		if _, err := st.Open(ctx, id, u(3)); !errors.Is(err, hongbao.ErrNotFound) {
			t.Errorf("Open of %s (no day table): %v, want not_found", id, err)
		}
		packets, details := dbtest.Tables(t, id)
		if dbtest.TableExists(t, db, packets) || dbtest.TableExists(t, db, details) {
			t.Errorf("an open created the day table %s", packets)
		}
	})

	t.Run("day table missing, the one packet twice", func(t *testing.T) {
		works := []store.Work{{ID: missingTable, Users: []hongbao.UserID{u(1)}}, {ID: missingTable, Users: []hongbao.UserID{u(2), u(3)}}}
		bs, err := st.OpenMany(ctx, works)
		if err != nil || len(bs) != 2 {
			t.Fatalf("OpenMany = %d batches, %v; want one per work", len(bs), err)
		}
		for i, w := range works {
			if len(bs[i].Outcomes) != len(w.Users) {
				t.Fatalf("work %d: %d outcomes for %d users", i, len(bs[i].Outcomes), len(w.Users))
			}
			for _, o := range bs[i].Outcomes {
				if !errors.Is(o.Err, hongbao.ErrNotFound) {
					t.Errorf("work %d: outcome %+v, want not_found", i, o)
				}
			}
		}
	})

	t.Run("a work without users", func(t *testing.T) {
		a := omCreate(t, st, buckets[0], omSpec{typ: hongbao.Fixed, total: 300, count: 3}, hongbao.Funded)
		bs, err := st.OpenMany(ctx, []store.Work{{ID: a}, {ID: a, Users: []hongbao.UserID{u(9)}}})
		if err != nil || len(bs) != 2 || len(bs[0].Outcomes) != 0 || len(bs[1].Outcomes) != 1 {
			t.Fatalf("OpenMany = %+v, %v; want no outcome for the empty work and one share", bs, err)
		}
		if r := bs[1].Outcomes[0].Result; r.Status != hongbao.Opened || r.Amount != 100 {
			t.Errorf("share %+v, want opened 100 fen", r)
		}
	})

	t.Run("day table missing, merged with others", func(t *testing.T) {
		// A made-up ID must not fail the packets it shares a transaction
		// with: it answers not_found, the others open.
		a := omCreate(t, st, b, omSpec{hongbao.Random, 1000, 5}, hongbao.Funded)
		var sum int64
		for i, works := range [][]store.Work{
			{{ID: a, Users: []hongbao.UserID{u(1)}}, {ID: missingTable, Users: []hongbao.UserID{u(1)}}},
			{{ID: missingTable, Users: []hongbao.UserID{u(2), u(3)}}, {ID: a, Users: []hongbao.UserID{u(2)}}},
		} {
			bs, err := st.OpenMany(ctx, works)
			if err != nil || len(bs) != 2 {
				t.Fatalf("round %d: OpenMany = %d batches, %v; want one per work", i, len(bs), err)
			}
			for j, w := range works {
				for k, o := range bs[j].Outcomes {
					switch {
					case w.ID == missingTable && !errors.Is(o.Err, hongbao.ErrNotFound):
						t.Errorf("round %d: open of the made-up packet = %+v, want not_found", i, o)
					case w.ID == a && (o.Err != nil || o.Result.Status != hongbao.Opened || o.Result.User != w.Users[k]):
						t.Errorf("round %d: open of %s = %+v, want a share", i, a, o)
					case w.ID == a:
						sum += o.Result.Amount
					}
				}
			}
		}
		p := dbtest.CheckPacket(t, db, a)
		if len(p.Details) != 2 || p.RemainingCount != 3 || p.RemainingAmount != 1000-sum {
			t.Errorf("packet %s: %d shares, %d left of %d fen; want the 2 shares answered (%d fen)", a, len(p.Details), p.RemainingAmount, p.Total, sum)
		}
		omCheckCredits(t, db, p)
	})
}

// TestOpenManyFence: a transaction including a packet of a bucket the SET
// does not own fails with ErrWrongSet, wherever that packet is in the
// works, and commits nothing of the other works; without it the same
// works open.
func TestOpenManyFence(t *testing.T) {
	ctx := context.Background()
	db := dbtest.DB(t, "a", 4)
	loc := dbtest.Shanghai(t)
	bs := omBuckets(4)
	mine, mine2, theirs, nobodys := bs[0], bs[1], bs[2], bs[3]
	set, other := dbtest.UniqueName("om"), dbtest.UniqueName("om")
	dbtest.Own(t, db, set, []hongbao.Bucket{mine, mine2})
	dbtest.Own(t, db, other, []hongbao.Bucket{theirs})
	st := store.New(db, set, loc, time.Now, rand.Int64N)
	stOther := store.New(db, other, loc, time.Now, rand.Int64N)

	a := omCreate(t, st, mine, omSpec{hongbao.Random, 1000, 5}, hongbao.Funded)
	d := omCreate(t, st, mine2, omSpec{hongbao.Fixed, 300, 3}, hongbao.Funded)
	c := omCreate(t, stOther, theirs, omSpec{hongbao.Random, 1000, 5}, hongbao.Funded)
	if _, _, err := st.Create(ctx, store.NewPacket{ID: omMustID(t, theirs), Sender: dbtest.FreshUser(),
		Req: hongbao.SendRequest{Total: 100, Count: 1, Type: hongbao.Fixed}, Expiry: time.Hour, Funding: hongbao.Funded}); !errors.Is(err, hongbao.ErrWrongSet) {
		t.Fatalf("create in a bucket the SET does not own: %v, want wrong_set", err)
	}
	noRow := omMustID(t, nobodys) // a bucket nobody owns, no row
	noTable := omMissingDayTable(t, db)
	for noTable.Bucket() == mine || noTable.Bucket() == mine2 {
		noTable = omMissingDayTable(t, db)
	}
	users := func(n int) []hongbao.UserID {
		return []hongbao.UserID{dbtest.FreshUser(), dbtest.FreshUser()}[:n]
	}
	for _, tc := range []struct {
		name string
		ids  []hongbao.PacketID
	}{
		{"owned then other SET's", []hongbao.PacketID{a, c}},
		{"other SET's then owned", []hongbao.PacketID{c, a}},
		{"owned, other SET's, owned", []hongbao.PacketID{a, c, d}},
		{"other SET's alone", []hongbao.PacketID{c}},
		{"unowned bucket, no row", []hongbao.PacketID{d, noRow, a}},
		{"unowned bucket, no row, alone", []hongbao.PacketID{noRow}},
		{"unowned bucket, no day table, alone", []hongbao.PacketID{noTable}},
		{"unowned bucket, no day table, with owned", []hongbao.PacketID{a, noTable}},
	} {
		var works []store.Work
		for _, id := range tc.ids {
			works = append(works, store.Work{ID: id, Users: users(2), SoldOutOpenersUpTo: 100})
		}
		got, err := st.OpenMany(ctx, works)
		if !errors.Is(err, hongbao.ErrWrongSet) {
			t.Errorf("%s: OpenMany: batches %+v, error %v; want wrong_set", tc.name, got, err)
		}
		if got != nil {
			t.Errorf("%s: batches %+v with the error", tc.name, got)
		}
		for _, id := range []hongbao.PacketID{a, d, c} {
			p := dbtest.CheckPacket(t, db, id)
			if len(p.Details) != 0 || p.RemainingAmount != p.Total || p.RemainingCount != p.Count {
				t.Errorf("%s: packet %s changed by a fenced transaction: %d shares, %d/%d left",
					tc.name, id, len(p.Details), p.RemainingAmount, p.RemainingCount)
			}
			omCheckCredits(t, db, p)
		}
	}
	// The control: without the foreign packet the same works commit, and
	// the other SET opens its own packet.
	got, err := st.OpenMany(ctx, []store.Work{{ID: a, Users: users(2)}, {ID: d, Users: users(1)}})
	if err != nil {
		t.Fatalf("OpenMany of owned packets: %v", err)
	}
	for i, b := range got {
		for _, o := range b.Outcomes {
			if o.Err != nil || o.Result.Status != hongbao.Opened {
				t.Errorf("owned work %d: outcome %+v, want opened", i, o)
			}
		}
	}
	if p := dbtest.CheckPacket(t, db, a); len(p.Details) != 2 {
		t.Errorf("packet a: %d shares after the control, want 2", len(p.Details))
	}
	if p := dbtest.CheckPacket(t, db, d); len(p.Details) != 1 || p.RemainingAmount != 200 {
		t.Errorf("packet d: %d shares, %d left after the control, want 1 and 200", len(p.Details), p.RemainingAmount)
	}
	if _, err := stOther.OpenMany(ctx, []store.Work{{ID: c, Users: users(1)}}); err != nil {
		t.Errorf("the owner of %s: %v", c, err)
	}
}

func omMustID(t *testing.T, b hongbao.Bucket) hongbao.PacketID {
	t.Helper()
	id, err := omMinter.Next(b)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

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
	buckets := omBuckets(3)
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
		sp := []omSpec{{hongbao.Random, 500, 5}, {hongbao.Fixed, 1000, 10}, {hongbao.Random, 30000, 300}, {hongbao.Random, 100000, 1000}}[i%4]
		ids[i] = omCreate(t, stores[i%2], buckets[i%len(buckets)], sp, hongbao.Funded)
	}
	deadlocks0 := omDeadlocks(t, dbs[0])

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
	deadline := time.Now().Add(1500 * time.Millisecond)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			st := stores[g%2]
			r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			for round := 0; round < 400 && time.Now().Before(deadline); round++ {
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
	omReport(t, failures)

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
		omCheckCredits(t, dbs[0], p)
	}
	if len(opens) != rows || sumOpened != sumShares {
		t.Errorf("%d opened outcomes for %d fen, %d detail rows for %d fen", len(opens), sumOpened, rows, sumShares)
	}
	if soldOutPackets == 0 || len(opens) == 0 {
		t.Errorf("%d calls, %d opens and %d sold-out packets: the run did not exercise contention", calls, len(opens), soldOutPackets)
	}
	t.Logf("%d OpenMany calls, %d shares, %d of %d packets sold out; server Innodb_deadlocks +%d during the run (retried inside the store; the counter is server-wide)",
		calls, len(opens), soldOutPackets, npackets, omDeadlocks(t, dbs[0])-deadlocks0)
}

// omReport fails t with the first 20 failures and how many more there are.
func omReport(t *testing.T, failures []string) {
	t.Helper()
	for _, f := range failures[:min(len(failures), 20)] {
		t.Error(f)
	}
	if len(failures) > 20 {
		t.Errorf("... and %d more failures", len(failures)-20)
	}
}

// omDeadlocks reads the server's deadlock counter.
func omDeadlocks(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var name string
	var n int64
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'").Scan(&name, &n); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0
		}
		t.Fatal(err)
	}
	return n
}
