package clustertest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
)

// TestCluster exercises the harness itself: a cluster of 2 SETs x 1
// server comes up, money moves through it, every kind of process survives
// kill -9 and a restart, and hbctl verify passes.
func TestCluster(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{ServersPerSet: 1})
	if len(c.Sets) != 2 || c.Sets[0].Name != "a" || c.Sets[1].Name != "b" || len(c.Sets[0].Servers) != 1 {
		t.Fatalf("sets: %+v", c.Sets)
	}
	cl := c.Client.Retrying(20 * time.Second)
	const sender, opener hongbao.UserID = 11, 12
	if out, err := c.Ctl("wallet", "credit", "--user", "11", "--amount", "5000"); err != nil || !strings.Contains(out, "balance 5000 fen") {
		t.Fatalf("hbctl wallet credit: %v\n%s", err, out)
	}
	send := cl.Send(sender, hongbao.SendRequest{Total: 1000, Count: 2, Type: hongbao.Fixed}, "k1")
	if send.Status != http.StatusCreated || send.Body.Total != 1000 {
		t.Fatalf("send: %v", send)
	}
	id, err := hongbao.ParsePacketID(send.Body.ID)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := c.SetOf(id)
	if err != nil {
		t.Fatal(err)
	}

	c.Kill(clustertest.Server, owner+"1") // the SET's only server
	if r := c.Client.Open(opener, send.Body.ID); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("open with the SET's server down: %v, want 503", r)
	}
	c.Restart(clustertest.Server, owner+"1")
	c.Restart(clustertest.Router, clustertest.Router)
	c.Kill(clustertest.Settler, owner)

	open := cl.Open(opener, send.Body.ID)
	if open.Status != http.StatusOK || open.Body.Status != hongbao.Opened || open.Body.Amount != 500 {
		t.Fatalf("open: %v", open)
	}
	var queued int
	if err := c.DB(owner).QueryRow("SELECT COUNT(*) FROM hb_set.outbox").Scan(&queued); err != nil || queued != 1 {
		t.Fatalf("outbox with the settler down: %d rows, %v; want 1", queued, err)
	}
	c.Restart(clustertest.Settler, owner)
	deadline := time.Now().Add(20 * time.Second)
	for {
		w := cl.Wallet(opener)
		if w.Status == http.StatusOK && w.Body.Balance == 500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("opener's wallet: %v, want 500", w)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if w := cl.Wallet(sender); w.Body.Balance != 4000 {
		t.Fatalf("sender's wallet: %v, want 4000", w)
	}
	c.CheckInvariants(t)
}
