package verify_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
)

// TestVerifyNamesThePackets: when the sums disagree, hbctl verify names the
// packets behind them. Two faults of the kinds issue #23 measured: a credit
// in the ledger for a share that no SET has (money created at a failover),
// and a refund waiting in a SET's outbox for a packet that owes none (a
// stale copy's refund after a failed move). Each is named with its packet,
// its SET, its key and amount, and the outbox row's id; a packet whose
// money is right is not named.
func TestVerifyNamesThePackets(t *testing.T) {
	// No settlers: the outbox rows stay where they are.
	c := clustertest.Start(t, clustertest.Options{NoSettlers: true, DevGrant: 1_000_000})
	bs := ctltest.BucketsOf(t, c, "a")
	created, _ := ctltest.SendInto(t, c, bs[0], 5, 2)
	owed, _ := ctltest.SendInto(t, c, bs[1], 4, 1)
	fine, _ := ctltest.SendInto(t, c, bs[2], 3, 3)
	c.CheckInvariants(t)

	ghost := ctltest.User()
	now := time.Now().UTC()
	for _, q := range []string{
		fmt.Sprintf("INSERT INTO ledger (entry_key, user_id, amount, kind, packet_id, created_at) VALUES ('%s', %d, 50, 'open', %d, NOW(3))",
			hongbao.OpenKey(created, ghost), ghost, created),
		fmt.Sprintf("INSERT INTO accounts (user_id, balance, updated_at) VALUES (%d, 50, NOW(3))", ghost),
	} {
		if _, err := c.WalletDB().Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	var sender int64
	if err := c.WalletDB().QueryRow("SELECT user_id FROM ledger WHERE entry_key = ?", hongbao.SendKey(owed)).Scan(&sender); err != nil {
		t.Fatal(err)
	}
	res, err := c.DB("a").Exec("INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at, set_name) VALUES (?,?,?,?,?,?,?)",
		hongbao.RefundKey(owed), sender, 813, hongbao.KindRefund, owed, now, "a")
	if err != nil {
		t.Fatal(err)
	}
	row, _ := res.LastInsertId()

	out, err := c.Ctl("verify")
	if err == nil || strings.Contains(out, "OK: every invariant holds") {
		t.Fatalf("verify passed with a ghost credit and a stuck refund: %v\n%s", err, out)
	}
	got := violations(out)
	t.Logf("verify:\n%s", strings.Join(got, "\n"))
	named := func(p hongbao.PacketID) string {
		for _, v := range got {
			if strings.HasPrefix(v, fmt.Sprintf("VIOLATION: packet %s (SET a, ", p)) {
				return v
			}
		}
		return ""
	}
	for _, want := range []struct {
		p     hongbao.PacketID
		parts []string
	}{
		{created, []string{"2 shares of", "3 credits of", fmt.Sprintf("ledger %s (seq ", hongbao.OpenKey(created, ghost)), "credits 50 fen, the share is in no SET's records"}},
		{owed, []string{"refund 0; ledger + outbox: debit 400, 1 credits of", "refund 813",
			fmt.Sprintf("outbox row %d of SET a: %s refund 813 fen (not delivered)", row, hongbao.RefundKey(owed))}},
	} {
		v := named(want.p)
		if v == "" {
			t.Errorf("verify does not name packet %s:\n%s", want.p, out)
			continue
		}
		for _, part := range want.parts {
			if !strings.Contains(v, part) {
				t.Errorf("verify's line of packet %s lacks %q:\n%s", want.p, part, v)
			}
		}
	}
	if named(fine) != "" || strings.Contains(out, fine.String()) {
		t.Errorf("verify names packet %s, whose money is right:\n%s", fine, out)
	}
}
