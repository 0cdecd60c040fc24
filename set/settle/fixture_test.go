package settle_test

// The money path end to end, through the router of a real cluster
// (clustertest: private MariaDB and memcached per SET, the real binaries):
// debits at send, credits through the outbox and the settler, refunds at
// expiry, sends left pending by a crash, idempotent and refused sends,
// duplicate deliveries, concurrent first credits and the history pages,
// under kill -9 where it matters. Every test ends with hbctl verify.
//
// They live with the settler because it ends every money movement they
// check; none needs the hbsettler command's main: clustertest builds the
// binary and runs it as a process. This file holds what they share: reads
// of balances, the ledger and the SETs' tables, and the wait for a quiet
// cluster.

import (
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// balance reads user's balance through the router.
func balance(t testing.TB, c *clustertest.Cluster, user hongbao.UserID) int64 {
	t.Helper()
	r := c.Client.Retrying(10 * time.Second).Wallet(user)
	if r.Status != http.StatusOK || r.Body.User != user.String() {
		t.Fatalf("GET /v1/me/wallet as %s: %v", user, r)
	}
	return r.Body.Balance
}

// ledgerSums returns the sum of every user's ledger entries.
func ledgerSums(t testing.TB, c *clustertest.Cluster) map[hongbao.UserID]int64 {
	t.Helper()
	sums := map[hongbao.UserID]int64{}
	rows, err := c.WalletDB().Query("SELECT user_id, SUM(amount) FROM ledger GROUP BY user_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var u hongbao.UserID
		var s int64
		if err := rows.Scan(&u, &s); err != nil {
			t.Fatal(err)
		}
		sums[u] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return sums
}

// entry is a ledger row.
type entry struct {
	key    string
	user   hongbao.UserID
	amount int64
	kind   string
	packet hongbao.PacketID
	at     time.Time
}

// ledger returns the ledger rows matching where (SQL after WHERE), in seq order.
func ledger(t testing.TB, c *clustertest.Cluster, where string, args ...any) []entry {
	t.Helper()
	rows, err := c.WalletDB().Query("SELECT entry_key, user_id, amount, kind, packet_id, created_at FROM ledger WHERE "+
		where+" ORDER BY seq", args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var es []entry
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.key, &e.user, &e.amount, &e.kind, &e.packet, &e.at); err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return es
}

// waitSettled waits until every SET has delivered its outbox, closed every
// packet past expiry (or, with all, every packet) and decided every pending
// send.
func waitSettled(t testing.TB, c *clustertest.Cluster, all bool, within time.Duration) {
	t.Helper()
	expiry := "SELECT COUNT(*) FROM hb_set.expiry WHERE expires_at <= UTC_TIMESTAMP(3)"
	if all {
		expiry = "SELECT COUNT(*) FROM hb_set.expiry"
	}
	deadline := time.Now().Add(within)
	for {
		var left []string
		for _, s := range c.Sets {
			db := c.DB(s.Name)
			for what, q := range map[string]string{
				"outbox":  "SELECT COUNT(*) FROM hb_set.outbox",
				"expiry":  expiry,
				"pending": "SELECT COUNT(*) FROM hb_set.pending",
			} {
				if n := dbtest.Count(t, db, q); n > 0 {
					left = append(left, fmt.Sprintf("SET %s: %d in %s", s.Name, n, what))
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled after %v: %s", within, strings.Join(left, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// packetRow is a packet as its SET's MySQL holds it.
type packetRow struct {
	set     string
	id      hongbao.PacketID
	funding hongbao.Funding
	total   int64
}

// packetsOf lists sender's packets in every day table of every SET.
func packetsOf(t testing.TB, c *clustertest.Cluster, sender hongbao.UserID) []packetRow {
	t.Helper()
	var out []packetRow
	for _, s := range c.Sets {
		db := c.DB(s.Name)
		for _, tb := range dbtest.DayTables(t, db) {
			rows, err := db.Query("SELECT id, funding, total FROM "+tb+" WHERE sender = ?", sender)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				p := packetRow{set: s.Name}
				if err := rows.Scan(&p.id, &p.funding, &p.total); err != nil {
					t.Fatal(err)
				}
				out = append(out, p)
			}
			rows.Close()
		}
	}
	return out
}

// mustID parses a packet ID the API answered.
func mustID(t testing.TB, s string) hongbao.PacketID {
	t.Helper()
	id, err := hongbao.ParsePacketID(s)
	if err != nil {
		t.Fatalf("packet id %q: %v", s, err)
	}
	return id
}

// expiresAt is when the API says packet p expires.
func expiresAt(t testing.TB, p api.PacketJSON) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, p.ExpiresAt)
	if err != nil {
		t.Fatalf("expires_at %q: %v", p.ExpiresAt, err)
	}
	return at
}

// outboxRow is a row of hb_set.outbox as written (a packed row with its
// shares: store/outboxrows.go).
type outboxRow struct {
	key, kind string
	user      hongbao.UserID
	amount    int64
	packet    hongbao.PacketID
	at        time.Time
	set       string
	n         int
	shares    sql.NullString
}

// outboxRows returns packet id's rows in the outbox of db, in id order.
func outboxRows(t testing.TB, db *sql.DB, id hongbao.PacketID) []outboxRow {
	t.Helper()
	rows, err := db.Query("SELECT entry_key, kind, user_id, amount, packet_id, created_at, set_name, n, shares FROM hb_set.outbox WHERE packet_id = ? ORDER BY id", id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.key, &r.kind, &r.user, &r.amount, &r.packet, &r.at, &r.set, &r.n, &r.shares); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// put writes r into db's outbox again.
func (r outboxRow) put(t testing.TB, db *sql.DB) {
	t.Helper()
	if _, err := db.Exec("INSERT INTO hb_set.outbox (entry_key, kind, user_id, amount, packet_id, created_at, set_name, n, shares) VALUES (?,?,?,?,?,?,?,?,?)",
		r.key, r.kind, r.user, r.amount, r.packet, r.at, r.set, r.n, r.shares); err != nil {
		t.Fatal(err)
	}
}
