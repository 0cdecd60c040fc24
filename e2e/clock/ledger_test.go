package clock_test

import (
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
)

// entry is one ledger row as the tests read it.
type entry struct {
	kind   string
	user   hongbao.UserID
	amount int64
}

// keyed is a ledger row with its entry key.
type keyed struct {
	key string
	entry
}

// ledger returns the ledger's rows that match where (with arg), in order.
func ledger(t *testing.T, c *packettest.Cluster, where string, arg any) []keyed {
	t.Helper()
	rows, err := c.WalletDB().QueryContext(t.Context(), "SELECT entry_key, kind, user_id, amount FROM ledger WHERE "+where+" ORDER BY seq", arg)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []keyed
	for rows.Next() {
		var e keyed
		if err := rows.Scan(&e.key, &e.kind, &e.user, &e.amount); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// entries returns the ledger's rows of packet id by entry key.
func entries(t *testing.T, c *packettest.Cluster, id hongbao.PacketID) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	for _, e := range ledger(t, c, "packet_id = ?", id) {
		out[e.key] = e.entry
	}
	return out
}

// waitEntries waits until the ledger holds every key of packet id (the
// settler delivered them), failing the test after within.
func waitEntries(t *testing.T, c *packettest.Cluster, id hongbao.PacketID, within time.Duration, keys ...string) map[string]entry {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
		got := entries(t, c, id)
		missing := 0
		for _, k := range keys {
			if _, ok := got[k]; !ok {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("packet %s: %d of the ledger entries %q missing after %v; the ledger has %v", id, missing, keys, within, got)
		}
	}
}

// waitEmpty waits until SET set's table is empty: hb_set.outbox (every
// credit and refund is in the wallet), hb_set.pending (every send is
// decided, by its server or the sweeper).
func waitEmpty(t *testing.T, c *packettest.Cluster, set, table string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
		n := dbtest.Count(t, c.DB(set), "SELECT COUNT(*) FROM "+table)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("SET %s: %d rows left in %s after %v", set, n, table, within)
		}
	}
}
