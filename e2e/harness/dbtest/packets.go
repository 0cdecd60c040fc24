package dbtest

// The tests' own view of the money, read with SQL of their own from a SET's
// MySQL, independently of the store's code: table names are restated from
// DESIGN.md's ID layout, and the invariants are asserted on the rows.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// FreshUser returns a user ID no other test (or run) uses: tests sharing a
// database look rows up by user.
func FreshUser() hongbao.UserID { return hongbao.UserID(mrand.Int64N(1<<62) + 1) }

// UniqueName returns prefix followed by 12 random hex digits: a SET name,
// an Idempotency-Key or a ledger key no other test uses.
func UniqueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Shanghai returns Asia/Shanghai, the time zone of every test
// configuration (and so of the day tables).
func Shanghai(t testing.TB) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// Own makes SET set own buckets in db's MySQL fence; the fence rows go
// when the test ends.
func Own(t testing.TB, db *sql.DB, set string, buckets []hongbao.Bucket) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fence.Own(ctx, db, set, 1, buckets); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DELETE FROM hb_fence.owned WHERE set_name = ?", set)
	})
}

// EpochMs is 2024-01-01T00:00:00Z in Unix milliseconds, time zero of
// packet IDs (DESIGN.md).
const EpochMs = 1704067200000

// Tables names the day table of packet id and its detail table from
// DESIGN.md's layout, restated here: an ID is 41 bits of milliseconds
// since EpochMs | 10 bits bucket | 12 bits sequence, and the packets of
// bucket b on local day dd live in db_<b/10>.t_<b%10>_dd. The name is
// checked against hongbao.PacketID.Table.
func Tables(t testing.TB, id hongbao.PacketID) (packets, details string) {
	t.Helper()
	v := int64(id)
	bucket := (v >> 12) & (1<<10 - 1)
	loc := Shanghai(t)
	day := time.UnixMilli(v>>22 + EpochMs).In(loc).Day()
	packets = fmt.Sprintf("db_%02d.t_%d_%02d", bucket/10, bucket%10, day)
	if want := id.Table(loc).Packets(); want != packets {
		t.Errorf("packet %s: DESIGN.md layout names table %s, hongbao.PacketID.Table says %s", id, packets, want)
	}
	return packets, packets + "_detail"
}

// Packet is a packet as its SET's MySQL holds it.
type Packet struct {
	ID                     hongbao.PacketID
	Sender                 hongbao.UserID
	Type                   string
	Total, RemainingAmount int64
	Count, RemainingCount  int
	Funding                hongbao.Funding
	Details                []Share                  // the detail rows, by seq
	Shares                 map[hongbao.UserID]int64 // the detail rows by user
}

// Share is one detail row.
type Share struct {
	User   hongbao.UserID
	Amount int64
	Seq    int
}

// MissingTable reports whether err is MySQL's "no such table" or "no such
// database".
func MissingTable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1146 || me.Number == 1049)
}

// ReadPacket reads packet id and its detail rows from db (a SET's MySQL,
// no database selected); nil when the packet is not there.
func ReadPacket(t testing.TB, db *sql.DB, id hongbao.PacketID) *Packet {
	t.Helper()
	pt, dt := Tables(t, id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := &Packet{ID: id, Shares: map[hongbao.UserID]int64{}}
	err := db.QueryRowContext(ctx, "SELECT sender, type, total, count, remaining_amount, remaining_count, funding FROM "+pt+" WHERE id = ?", id).
		Scan(&p.Sender, &p.Type, &p.Total, &p.Count, &p.RemainingAmount, &p.RemainingCount, &p.Funding)
	if errors.Is(err, sql.ErrNoRows) || MissingTable(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("packet %s in %s: %v", id, pt, err)
	}
	rows, err := db.QueryContext(ctx, "SELECT user_id, amount, seq FROM "+dt+" WHERE packet_id = ? ORDER BY seq", id)
	if err != nil {
		t.Fatalf("details of %s: %v", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var s Share
		if err := rows.Scan(&s.User, &s.Amount, &s.Seq); err != nil {
			t.Fatal(err)
		}
		p.Details = append(p.Details, s)
		p.Shares[s.User] = s.Amount
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return p
}

// CheckPacket reads packet id from db, failing the test if it is not
// there, asserts its invariants (Check) and returns it.
func CheckPacket(t testing.TB, db *sql.DB, id hongbao.PacketID) *Packet {
	t.Helper()
	p := ReadPacket(t, db, id)
	if p == nil {
		pt, _ := Tables(t, id)
		t.Fatalf("packet %s: no row in %s", id, pt)
	}
	p.Check(t)
	return p
}

// Check asserts DESIGN.md's invariants 1 and 2 on p's rows: the shares
// and what is left add up to the total and the count, every share is at
// least 1 fen, no user holds two, the seqs run 1..n, and what is left can
// pay the shares left (nothing when none is).
func (p *Packet) Check(t testing.TB) {
	t.Helper()
	var sum int64
	seen := map[hongbao.UserID]bool{}
	for i, s := range p.Details {
		if seen[s.User] {
			t.Errorf("packet %s: user %s has two shares", p.ID, s.User)
		}
		seen[s.User] = true
		if s.Amount < 1 {
			t.Errorf("packet %s: user %s has a share of %d fen", p.ID, s.User, s.Amount)
		}
		if s.Seq != i+1 {
			t.Errorf("packet %s: share %d has seq %d", p.ID, i+1, s.Seq)
		}
		sum += s.Amount
	}
	if sum+p.RemainingAmount != p.Total {
		t.Errorf("packet %s: sum(amount) %d + remaining_amount %d != total %d", p.ID, sum, p.RemainingAmount, p.Total)
	}
	if len(p.Details)+p.RemainingCount != p.Count {
		t.Errorf("packet %s: count(detail) %d + remaining_count %d != count %d", p.ID, len(p.Details), p.RemainingCount, p.Count)
	}
	if p.RemainingCount < 0 || p.RemainingAmount < int64(p.RemainingCount) {
		t.Errorf("packet %s: remaining %d fen for %d shares", p.ID, p.RemainingAmount, p.RemainingCount)
	}
	if p.RemainingCount == 0 && p.RemainingAmount != 0 {
		t.Errorf("packet %s: sold out with %d fen left", p.ID, p.RemainingAmount)
	}
}

// OutboxCredits returns the wallet credits of packet id's shares waiting
// in db's outbox (kind open), by user: a row's own, or those a packed row
// holds ("user:amount,...", store/outboxrows.go), read here on their own
// so that a test checks the store's packing against the format, not
// against itself.
func OutboxCredits(t testing.TB, db *sql.DB, id hongbao.PacketID) map[hongbao.UserID][]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	credits := map[hongbao.UserID][]int64{}
	rows, err := db.QueryContext(ctx, "SELECT user_id, amount, n, shares FROM hb_set.outbox WHERE packet_id = ? AND kind = 'open'", id)
	if MissingTable(err) {
		return credits
	}
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var u hongbao.UserID
		var amount int64
		var n int
		var shares sql.NullString
		if err := rows.Scan(&u, &amount, &n, &shares); err != nil {
			t.Fatal(err)
		}
		if !shares.Valid {
			credits[u] = append(credits[u], amount)
			continue
		}
		var sum int64
		pairs := strings.Split(shares.String, ",")
		for _, pair := range pairs {
			var pu hongbao.UserID
			var pa int64
			if _, err := fmt.Sscanf(pair, "%d:%d", &pu, &pa); err != nil {
				t.Fatalf("packet %s: packed share %q: %v", id, pair, err)
			}
			credits[pu] = append(credits[pu], pa)
			sum += pa
		}
		if u != 0 || sum != amount || n != len(pairs) {
			t.Errorf("packet %s: a packed row of user %s, %d fen and n %d holds %d shares of %d fen", id, u, amount, n, len(pairs), sum)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return credits
}
