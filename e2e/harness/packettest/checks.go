package packettest

// What the cluster tests assert on the SETs' MySQL: where a packet's rows
// are, that they are consistent, and that the clients' answers agree with
// them.

import (
	"database/sql"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// DBPacket is a packet as the MySQL of its SET holds it.
type DBPacket struct {
	dbtest.Packet
	Set string
}

// CheckPacket finds packet id in the SETs' MySQL, asserts it is held by
// exactly the SET topo says owns its bucket, asserts DESIGN.md's invariants
// 1 and 2 on its rows, and that every share's wallet credit waits in an
// outbox, and returns them (nil if it is nowhere).
func (c *Cluster) CheckPacket(t testing.TB, topo *topology.Map, id hongbao.PacketID) *DBPacket {
	t.Helper()
	owner := topo.Owner(id.Bucket()).Name
	var found *DBPacket
	for _, s := range c.Sets {
		p := dbtest.ReadPacket(t, c.DB(s.Name), id)
		if p == nil {
			continue
		}
		if s.Name != owner {
			t.Errorf("packet %s (bucket %d) has rows on SET %s, but SET %s owns the bucket", id, id.Bucket(), s.Name, owner)
			continue
		}
		found = &DBPacket{Packet: *p, Set: s.Name}
	}
	if found == nil {
		t.Errorf("packet %s (bucket %d) is not in the MySQL of its owner SET %s", id, id.Bucket(), owner)
		return nil
	}
	p := found
	p.Check(t)
	// Every share has its wallet credit in an outbox (no settler runs in
	// this cluster, so none is delivered): exactly one, of the same amount.
	credits := map[hongbao.UserID][]int64{}
	for _, s := range c.Sets {
		for u, cs := range dbtest.OutboxCredits(t, c.DB(s.Name), id) {
			credits[u] = append(credits[u], cs...)
		}
	}
	for u, share := range p.Shares {
		if cs := credits[u]; len(cs) != 1 || cs[0] != share {
			t.Errorf("packet %s: user %s holds %d fen, outbox credits %v", id, u, share, cs)
		}
	}
	for u, cs := range credits {
		if _, ok := p.Shares[u]; !ok {
			t.Errorf("packet %s: outbox credits %v to user %s, who holds no share", id, cs, u)
		}
	}
	if p.Funding != hongbao.Funded {
		t.Errorf("packet %s: funding %d, want %d (funded: the sender was debited)", id, p.Funding, hongbao.Funded)
	}
	if p.Type == string(hongbao.Fixed) {
		for u, a := range p.Shares {
			if a != p.Total/int64(p.Count) {
				t.Errorf("fixed packet %s: user %s got %d, want %d", id, u, a, p.Total/int64(p.Count))
			}
		}
	}
	return p
}

// SenderRows counts sender's rows, over every SET, in the packet table day
// and in the idempotency table of its bucket (those of key, unless key is
// "").
func (c *Cluster) SenderRows(t testing.TB, day hongbao.DayTable, sender hongbao.UserID, key string) (packets, keys int) {
	t.Helper()
	idem, args := "SELECT COUNT(*) FROM "+day.DB()+".t_idem WHERE sender = ?", []any{sender}
	if key != "" {
		idem, args = idem+" AND idem_key = ?", append(args, key)
	}
	count := func(db *sql.DB, q string, args ...any) int {
		var n int
		if err := db.QueryRow(q, args...).Scan(&n); err != nil && !dbtest.MissingTable(err) {
			t.Fatal(err)
		}
		return n
	}
	for _, s := range c.Sets {
		packets += count(c.DB(s.Name), "SELECT COUNT(*) FROM "+day.Packets()+" WHERE sender = ?", sender)
		keys += count(c.DB(s.Name), idem, args...)
	}
	return packets, keys
}

// CheckAnswers compares the final answers clients got for packet p with its
// rows: every answer is final, every opened/already_opened amount is the
// user's share in MySQL, no sold_out went to a user holding a share, and no
// user was told opened twice. It returns the number of "opened" answers.
func CheckAnswers(t testing.TB, p *DBPacket, answers []OpenAnswer) (opened int) {
	t.Helper()
	openedBy := map[hongbao.UserID]int{}
	for _, a := range answers {
		kind, err := clustertest.Classify(a.R)
		if err != nil {
			t.Errorf("packet %s, user %s (after %d retries, %v): %v", a.Packet, a.User, a.Retries, a.Took, err)
			continue
		}
		share, has := p.Shares[a.User]
		switch kind {
		case hongbao.Opened, hongbao.AlreadyOpened:
			if kind == hongbao.Opened {
				opened++
				openedBy[a.User]++
			}
			if !has {
				t.Errorf("packet %s: user %s was told %s %d fen, but has no share in MySQL", a.Packet, a.User, kind, a.R.Amount())
			} else if share != a.R.Amount() {
				t.Errorf("packet %s: user %s was told %s %d fen, MySQL says %d", a.Packet, a.User, kind, a.R.Amount(), share)
			}
		case "sold_out":
			if has {
				t.Errorf("packet %s: user %s was told sold_out, but holds a share of %d fen", a.Packet, a.User, share)
			}
		}
	}
	for u, n := range openedBy {
		if n > 1 {
			t.Errorf("packet %s: user %s was told opened %d times", p.ID, u, n)
		}
	}
	return opened
}
