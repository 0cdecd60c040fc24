package store

// Golden tests of the SQL the open transaction builds: for a fixed set of
// works, the exact statements and arguments of every round trip (the read:
// fence, FOR UPDATE locks and shares; the write block: fence check,
// inserts, outbox, conditional updates, SIGNAL; the openers read) are
// compared with testdata/opensql/*.golden. Run with -update to rewrite the
// files after a deliberate change, and read the diff: the locks must stay
// in packet ID order, the updates conditional on what the transaction
// read or knew.

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	hongbao "github.com/hongbao-dev/hongbao"
)

var update = flag.Bool("update", false, "rewrite golden files")

// shanghai is the cluster's time zone (no daylight saving since 1991).
var shanghai = time.FixedZone("Asia/Shanghai", 8*3600)

// goldenNow is the clock of every golden transaction; its nanoseconds show
// the write block's time cut to the millisecond, as DATETIME(3) keeps it.
var goldenNow = time.Date(2026, 3, 15, 12, 0, 0, 123456789, shanghai)

// goldenIntn draws the middle of the range: a Random share of 1000 fen in
// 10 is 100.
func goldenIntn(n int64) int64 { return n / 2 }

// goldenID is the ID of the seq-th packet created on day of March 2026 in
// bucket b: its table is db_<b/10>.t_<b%10>_<day>.
func goldenID(t *testing.T, day int, b hongbao.Bucket, seq int) hongbao.PacketID {
	t.Helper()
	id, err := hongbao.NewPacketID(time.Date(2026, 3, day, 10, 0, 0, 0, shanghai), b, seq)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// goldenPacket is packet id of typ, total and count as MySQL holds it after
// the shares given: funded, and live for two days (still at goldenNow).
func goldenPacket(id hongbao.PacketID, typ hongbao.Type, total int64, count int, shares map[hongbao.UserID]int64) hongbao.Packet {
	p := hongbao.Packet{ID: id, Sender: 9, Type: typ, Total: total, Count: count, RemainingAmount: total, RemainingCount: count,
		CreatedAt: id.Time().UTC(), ExpiresAt: id.Time().Add(48 * time.Hour).UTC(), Funding: hongbao.Funded}
	for _, a := range shares {
		p.RemainingAmount -= a
		p.RemainingCount--
	}
	return p
}

// goldenCase is one transaction: the SET's packets (with their shares),
// the works and the answers of the write blocks in turn.
type goldenCase struct {
	name      string
	packets   []hongbao.Packet // named p1, p2, ... in the golden file
	shares    map[hongbao.PacketID]map[hongbao.UserID]int64
	works     []Work
	writeErrs []error
	events    bool // webhooks on (WithEvents)
}

// goldenCases are the transactions pinned. The write block's fence check
// lists the known packets' buckets in order (bucketsOf sorts them), so even
// known packets of several buckets make one statement.
func goldenCases(t *testing.T) []goldenCase {
	t.Helper()
	us := func(ids ...hongbao.UserID) []hongbao.UserID { return ids }
	known := func(p hongbao.Packet, openers map[hongbao.UserID]int64) *hongbao.Snapshot {
		return &hongbao.Snapshot{Packet: p, Openers: openers}
	}
	changed := &mysql.MySQLError{Number: errPacketChanged, SQLState: [5]byte{'4', '5', '0', '0', '0'}, Message: "packet changed"}
	dup := &mysql.MySQLError{Number: 1062, SQLState: [5]byte{'2', '3', '0', '0', '0'}, Message: "Duplicate entry for key 'PRIMARY'"}

	a15, a15b := goldenID(t, 15, 123, 1), goldenID(t, 15, 123, 2) // db_12.t_3_15
	a14 := goldenID(t, 14, 123, 1)                                // db_12.t_3_14
	b15 := goldenID(t, 15, 456, 1)                                // db_45.t_6_15
	return []goldenCase{
		{
			name:    "one_packet",
			packets: []hongbao.Packet{goldenPacket(a15, hongbao.Random, 1000, 10, nil)},
			works:   []Work{{ID: a15, Users: us(101, 102)}},
		},
		{
			// Given in reverse: locked, inserted and updated in ID order;
			// the outbox follows the works.
			name: "one_day_table",
			packets: []hongbao.Packet{
				goldenPacket(a15, hongbao.Random, 1000, 10, map[hongbao.UserID]int64{101: 150}),
				goldenPacket(a15b, hongbao.Fixed, 300, 3, nil),
			},
			shares: map[hongbao.PacketID]map[hongbao.UserID]int64{a15: {101: 150}},
			works:  []Work{{ID: a15b, Users: us(102)}, {ID: a15, Users: us(103, 101)}},
		},
		{
			// Two buckets in two databases: one fence statement for both,
			// a statement per table; p1 asks for its openers (one more read).
			name: "two_buckets",
			packets: []hongbao.Packet{
				goldenPacket(a15, hongbao.Random, 1000, 10, nil),
				goldenPacket(b15, hongbao.Fixed, 500, 5, nil),
			},
			works: []Work{{ID: b15, Users: us(101, 101)}, {ID: a15, Users: us(101), OpenersUpTo: 100}},
		},
		{
			// The same packet in two works: read once, users once.
			name:    "same_packet_twice",
			packets: []hongbao.Packet{goldenPacket(a15, hongbao.Random, 1000, 10, nil)},
			works:   []Work{{ID: a15, Users: us(101)}, {ID: a15, Users: us(102, 101)}},
		},
		{
			// p1 known: not read; its bucket is checked and its update is
			// conditional on the known 200/2. p2 is read.
			name: "known_and_unknown",
			packets: []hongbao.Packet{
				goldenPacket(a15, hongbao.Fixed, 300, 3, map[hongbao.UserID]int64{201: 100}),
				goldenPacket(b15, hongbao.Random, 1000, 10, nil),
			},
			shares: map[hongbao.PacketID]map[hongbao.UserID]int64{a15: {201: 100}},
			works: []Work{
				{ID: a15, Users: us(202, 201), Known: known(goldenPacket(a15, hongbao.Fixed, 300, 3, map[hongbao.UserID]int64{201: 100}),
					map[hongbao.UserID]int64{201: 100})},
				{ID: b15, Users: us(301)},
			},
		},
		{
			// Every packet known: no read at all; two tables of one bucket,
			// updated in table then ID order.
			name: "known_only",
			packets: []hongbao.Packet{
				goldenPacket(a14, hongbao.Random, 800, 8, map[hongbao.UserID]int64{201: 90}),
				goldenPacket(a15, hongbao.Fixed, 300, 3, nil),
			},
			shares: map[hongbao.PacketID]map[hongbao.UserID]int64{a14: {201: 90}},
			works: []Work{
				{ID: a15, Users: us(301), Known: known(goldenPacket(a15, hongbao.Fixed, 300, 3, nil), nil)},
				{ID: a14, Users: us(302), Known: known(goldenPacket(a14, hongbao.Random, 800, 8, map[hongbao.UserID]int64{201: 90}),
					map[hongbao.UserID]int64{201: 90})},
			},
		},
		{
			// Known packets in two buckets: the write block's fence check
			// names both, in bucket order whatever order the works come in.
			name: "known_two_buckets",
			packets: []hongbao.Packet{
				goldenPacket(a15, hongbao.Fixed, 300, 3, nil),
				goldenPacket(b15, hongbao.Random, 1000, 10, nil),
			},
			works: []Work{
				{ID: b15, Users: us(301), Known: known(goldenPacket(b15, hongbao.Random, 1000, 10, nil), nil)},
				{ID: a15, Users: us(302), Known: known(goldenPacket(a15, hongbao.Fixed, 300, 3, nil), nil)},
			},
		},
		{
			// The knowledge misses 205's share: the write block signals
			// packet changed (the recorder answers as MySQL would), the
			// transaction rolls back and the works are applied again from
			// a read, conditional on 700/8.
			name: "known_stale",
			packets: []hongbao.Packet{
				goldenPacket(a15, hongbao.Random, 1000, 10, map[hongbao.UserID]int64{201: 150, 205: 150}),
			},
			shares: map[hongbao.PacketID]map[hongbao.UserID]int64{a15: {201: 150, 205: 150}},
			works: []Work{{ID: a15, Users: us(202, 205),
				Known: known(goldenPacket(a15, hongbao.Random, 1000, 10, map[hongbao.UserID]int64{201: 150}), map[hongbao.UserID]int64{201: 150})}},
			writeErrs: []error{changed},
		},
		{
			// A large packet known without its openers (Unlisted): no read,
			// a share drawn for every user, no openers asked back.
			name: "known_unlisted",
			packets: []hongbao.Packet{
				goldenPacket(a15, hongbao.Random, 5000, 50, map[hongbao.UserID]int64{201: 90}),
			},
			shares: map[hongbao.PacketID]map[hongbao.UserID]int64{a15: {201: 90}},
			works: []Work{{ID: a15, Users: us(301, 302), OpenersUpTo: 10,
				Known: &hongbao.Snapshot{Packet: goldenPacket(a15, hongbao.Random, 5000, 50, map[hongbao.UserID]int64{201: 90}), Unlisted: true}}},
		},
		{
			// An unlisted packet's work repeats an opener (201): the details'
			// key refuses the block (the recorder answers as MySQL would),
			// the transaction rolls back and the works are applied again
			// from a read, which answers 201 already_opened.
			name: "known_unlisted_repeat",
			packets: []hongbao.Packet{
				goldenPacket(a15, hongbao.Random, 5000, 50, map[hongbao.UserID]int64{201: 90}),
			},
			shares: map[hongbao.PacketID]map[hongbao.UserID]int64{a15: {201: 90}},
			works: []Work{{ID: a15, Users: us(201, 302), OpenersUpTo: 10,
				Known: &hongbao.Snapshot{Packet: goldenPacket(a15, hongbao.Random, 5000, 50, map[hongbao.UserID]int64{201: 90}), Unlisted: true}}},
			writeErrs: []error{dup},
		},
		{
			// A work without users reads no share of its packet (IN (NULL))
			// and writes nothing for it.
			name: "empty_users",
			packets: []hongbao.Packet{
				goldenPacket(a15, hongbao.Fixed, 300, 3, nil),
				goldenPacket(b15, hongbao.Random, 1000, 10, nil),
			},
			works: []Work{{ID: a15}, {ID: b15, Users: us(101)}},
		},
		{
			// Webhooks on: one multi-row insert of packet.opened for the
			// shares, and packet.finished for p1, whose last share this
			// transaction takes (best-luck opener read from its details).
			name: "events",
			packets: []hongbao.Packet{
				goldenPacket(a15, hongbao.Fixed, 300, 3, map[hongbao.UserID]int64{201: 100}),
				goldenPacket(b15, hongbao.Random, 1000, 10, nil),
			},
			shares: map[hongbao.PacketID]map[hongbao.UserID]int64{a15: {201: 100}},
			works:  []Work{{ID: b15, Users: us(301)}, {ID: a15, Users: us(202, 203)}},
			events: true,
		},
		{
			name:    "empty_users_alone",
			packets: []hongbao.Packet{goldenPacket(a15, hongbao.Fixed, 300, 3, nil)},
			works:   []Work{{ID: a15}},
		},
	}
}

// runCase applies the works of c in one OpenMany against a recorder
// holding c's packets, and returns the store and what it sent.
func runCase(t *testing.T, c goldenCase) (*Store, []recorded, []Batch) {
	t.Helper()
	w := world{packets: map[hongbao.PacketID]hongbao.Packet{}, shares: c.shares}
	for _, p := range c.packets {
		w.packets[p.ID] = p
	}
	rec := &recorder{world: w, writeErrs: slices.Clone(c.writeErrs)}
	db := sql.OpenDB(rec)
	defer db.Close()
	s := New(db, "g1", shanghai, func() time.Time { return goldenNow }, goldenIntn)
	if c.events {
		s.WithEvents()
	}
	bs, err := s.OpenMany(context.Background(), c.works)
	if err != nil {
		t.Fatalf("%s: OpenMany: %v", c.name, err)
	}
	return s, rec.statements(), bs
}

// TestOpenSQLGolden pins the text and the arguments of every statement of
// the open transaction for each golden case.
func TestOpenSQLGolden(t *testing.T) {
	for _, c := range goldenCases(t) {
		t.Run(c.name, func(t *testing.T) {
			s, log, bs := runCase(t, c)
			checkStatements(t, log)
			names := map[hongbao.PacketID]string{}
			for i, p := range c.packets {
				names[p.ID] = fmt.Sprintf("p%d", i+1)
			}
			got := transcript(s, c, names, log, bs)
			path := filepath.Join("testdata", "opensql", c.name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./store -run TestOpenSQLGolden -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("the SQL of the open transaction changed: %s\n"+
					"if the change is meant, run go test ./store -run TestOpenSQLGolden -update and review the diff of %s",
					firstDiff(got, string(want)), path)
			}
		})
	}
}

// TestOpenSQLGoldenStable runs every case again and again: the SQL must
// not depend on map order, or the golden files would be flaky.
func TestOpenSQLGoldenStable(t *testing.T) {
	for _, c := range goldenCases(t) {
		_, first, _ := runCase(t, c)
		for i := 1; i < 20; i++ {
			if _, log, _ := runCase(t, c); fmt.Sprint(log) != fmt.Sprint(first) {
				t.Fatalf("%s: run %d sent other SQL than run 0:\n%v\n%v", c.name, i, log, first)
			}
		}
	}
}

// checkStatements asserts what the golden files' format relies on and what
// must hold whatever the text: one line per statement text, an argument per
// placeholder, and the read's row locks in packet ID order.
func checkStatements(t *testing.T, log []recorded) {
	t.Helper()
	for _, r := range log {
		if strings.Contains(r.query, "\n") {
			t.Errorf("statement with a line break (the golden format breaks lines itself): %q", r.query)
		}
		if n := strings.Count(r.query, "?"); n != len(r.args) {
			t.Errorf("%d placeholders, %d arguments: %s", n, len(r.args), r.query)
		}
		if !strings.HasPrefix(r.query, "SELECT bucket FROM hb_fence.owned") {
			continue
		}
		var locked []hongbao.PacketID
		i := 1
		for i < len(r.args) {
			if _, ok := r.args[i].(int); !ok {
				break
			}
			i++
		}
		for range strings.Count(r.query, " FOR UPDATE)") {
			locked = append(locked, r.args[i].(hongbao.PacketID))
			i++
		}
		if !slices.IsSorted(locked) || len(slices.Compact(slices.Clone(locked))) != len(locked) {
			t.Errorf("row locks not in strict packet ID order: %v", locked)
		}
	}
}

// transcript prints a golden case: the packets as MySQL holds them, the
// works, every statement with its arguments, and the batches.
func transcript(s *Store, c goldenCase, names map[hongbao.PacketID]string, log []recorded, bs []Batch) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# The SQL of one OpenMany (TestOpenSQLGolden, -update rewrites this file).\n")
	fmt.Fprintf(&b, "# A statement is shown with a line break after each ';' and before each\n")
	fmt.Fprintf(&b, "# UNION ALL: the text sent is its lines joined. Its arguments follow.\n\n")
	b.WriteString("packets (as MySQL holds them):\n")
	for _, p := range c.packets {
		fmt.Fprintf(&b, "  %s = %d: %s, %s %d/%d, left %d/%d, shares %s\n", names[p.ID], p.ID, s.Table(p.ID).Packets(),
			p.Type, p.Total, p.Count, p.RemainingAmount, p.RemainingCount, printShares(c.shares[p.ID]))
	}
	b.WriteString("\nworks:\n")
	for _, w := range c.works {
		fmt.Fprintf(&b, "  %s users %v", names[w.ID], w.Users)
		if w.OpenersUpTo > 0 || w.SoldOutOpenersUpTo > 0 {
			fmt.Fprintf(&b, ", openers up to %d (sold out %d)", w.OpenersUpTo, w.SoldOutOpenersUpTo)
		}
		if k := w.Known; k != nil {
			if k.Unlisted {
				fmt.Fprintf(&b, ", known: left %d/%d, openers unlisted", k.Packet.RemainingAmount, k.Packet.RemainingCount)
			} else {
				fmt.Fprintf(&b, ", known: left %d/%d, openers %s", k.Packet.RemainingAmount, k.Packet.RemainingCount, printShares(k.Openers))
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\nstatements:\n")
	for _, r := range log {
		q := strings.ReplaceAll(r.query, ";", ";\n")
		q = strings.ReplaceAll(q, " UNION ALL ", "\n UNION ALL ")
		b.WriteString(strings.TrimSuffix(q, "\n") + "\n")
		for i, a := range r.args {
			fmt.Fprintf(&b, "    %2d %s\n", i+1, printArg(a, names))
		}
	}
	b.WriteString("\nbatches:\n")
	for i, bt := range bs {
		fmt.Fprintf(&b, "  %s:", names[c.works[i].ID])
		for j, o := range bt.Outcomes {
			if o.Err != nil {
				fmt.Fprintf(&b, " %s %s;", c.works[i].Users[j], hongbao.Code(o.Err))
			} else {
				fmt.Fprintf(&b, " %s %s %d;", o.Result.User, o.Result.Status, o.Result.Amount)
			}
		}
		if p := bt.Packet; p != nil {
			fmt.Fprintf(&b, " left %d/%d", p.RemainingAmount, p.RemainingCount)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// printArg prints an argument with its Go type; a packet ID by its name.
func printArg(a any, names map[hongbao.PacketID]string) string {
	switch v := a.(type) {
	case hongbao.PacketID:
		if n, ok := names[v]; ok {
			return "PacketID " + n
		}
		return fmt.Sprintf("PacketID %d (not a packet of the case)", v)
	case hongbao.UserID:
		return fmt.Sprintf("UserID %d", v)
	case string:
		return fmt.Sprintf("string %q", v)
	case time.Time:
		return "time.Time " + v.Format(time.RFC3339Nano) + " (" + v.Location().String() + ")"
	}
	return fmt.Sprintf("%T %v", a, a)
}

func printShares(m map[hongbao.UserID]int64) string {
	var parts []string
	for _, u := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d:%d", u, m[u]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// firstDiff reports the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(g), len(w)) {
		gl, wl := "<none>", "<none>"
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, gl, wl)
		}
	}
	return "equal"
}
