package clock_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
)

// TestRouterSkewedBeyondTheWindow: a router whose clock is off by more
// than the internal signatures' window (api.Window, 10 s) has every
// request it signs refused by the SET's servers (403 forbidden to the
// router, which tries the next server and then answers the client 503
// unavailable: the system's fault, not the client's). A send and an open
// change nothing: no packet, no share, no ledger entry. Within the window
// it works, and once its clock is set right the same open succeeds.
func TestRouterSkewedBeyondTheWindow(t *testing.T) {
	c := packettest.StartWith(t, clustertest.Options{Sets: 1})
	const total = 1000
	sender := c.RichUser(t)
	id := c.MustSend(t, sender, packettest.SendBody{Total: total, Count: 10, Type: "random"}, "")
	for _, tc := range []struct {
		offset time.Duration
		works  bool
	}{
		{api.Window / 2, true},
		{api.Window + 20*time.Second, false},
		{-api.Window - 20*time.Second, false},
	} {
		t.Run(fmt.Sprint(tc.offset), func(t *testing.T) {
			c.Skew(clustertest.Router, clustertest.Router, tc.offset)
			defer c.Skew(clustertest.Router, clustertest.Router, 0)
			waitEmpty(t, c, "a", "hb_set.outbox", 30*time.Second) // the last subtest's credit is delivered: the money is still
			before := moneyOf(t, c, sender, id)
			opener := dbtest.FreshUser()
			send := c.Send(sender, packettest.SendBody{Total: total, Count: 10, Type: "random"}, "")
			open := c.Open(opener, id)
			if tc.works {
				if send.Status != http.StatusCreated || open.Status != http.StatusOK || open.Str("status") != hongbao.Opened {
					t.Fatalf("router %v off, within the window: send %v, open %v; want 201 and 200 opened", tc.offset, send, open)
				}
				return
			}
			for what, r := range map[string]clustertest.Reply{"send": send, "open": open} {
				if !r.IsProblem(http.StatusServiceUnavailable, "unavailable") {
					t.Errorf("router %v off: %s answered %v; want 503 unavailable", tc.offset, what, r)
				}
			}
			if after := moneyOf(t, c, sender, id); after != before {
				t.Errorf("router %v off: refused requests changed the money: %+v, then %+v", tc.offset, before, after)
			}
			c.Skew(clustertest.Router, clustertest.Router, 0)
			if r := c.Open(opener, id); r.Status != http.StatusOK || r.Str("status") != hongbao.Opened {
				t.Errorf("the router's clock set right: the refused opener's open answered %v; want 200 opened", r)
			}
		})
	}
	c.CheckInvariants(t)
}

// money is what a refused request must not change.
type money struct {
	balance int64 // the sender's
	packets int   // SET a's packets not yet closed or still pending
	shares  int   // packet id's shares
	outbox  int   // SET a's credits and refunds not delivered yet
	ledger  int   // the wallet's entries
}

func moneyOf(t *testing.T, c *packettest.Cluster, sender hongbao.UserID, id hongbao.PacketID) money {
	t.Helper()
	db := c.DB("a")
	return money{balance: c.Balance(t, sender),
		packets: dbtest.Count(t, db, "SELECT (SELECT COUNT(*) FROM hb_set.expiry) + (SELECT COUNT(*) FROM hb_set.pending)"),
		shares:  dbtest.Count(t, db, "SELECT COUNT(*) FROM "+id.Table(c.Loc).Details()+" WHERE packet_id = ?", id),
		outbox:  dbtest.Count(t, db, "SELECT COUNT(*) FROM hb_set.outbox"),
		ledger:  dbtest.Count(t, c.WalletDB(), "SELECT COUNT(*) FROM ledger")}
}
