package replication_test

import (
	"fmt"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestReadYourWritesFromReplica: with details read from the SET's replica
// (replication.read_replica), a sender's GET of the packet right after the
// 201 of its send, and an opener's GET right after their open, answer 200
// with what they were just told: never a 5xx, never a packet without the
// opener's share. Measured before: 9 of 30 such reads answered 503 on the
// dev cluster. Issue 23, finding 8.
func TestReadYourWritesFromReplica(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Sets: 1, ServersPerSet: 1, NoSettlers: true, DevGrant: 1_000_000_000,
		Replicated: []string{"a"}, ReadReplica: true})
	const rounds = 60
	replica := dbtest.Open(t, c.Sets[0].Group.Replicas[0].DSN, 1)
	selects := func() int64 {
		var name string
		var n int64
		if err := replica.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_select'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := selects()
	sender, opener := dbtest.FreshUser(), dbtest.FreshUser()
	var fails []string
	for i := range rounds {
		sent := c.Client.Send(sender, hongbao.SendRequest{Total: 1000 + int64(i), Count: 5, Type: hongbao.Random, Greeting: "ryw"}, fmt.Sprintf("ryw-%d", i))
		if sent.Status != 201 {
			t.Fatalf("send %d: %s", i, sent)
		}
		id := sent.Body.ID
		if d := c.Client.Detail(sender, id); d.Status != 200 || d.Body.Total != 1000+int64(i) || d.Body.RemainingCount != 5 {
			fails = append(fails, fmt.Sprintf("send %d: GET %s right after its 201: %s", i, id, d))
		}
		o := c.Client.Open(opener, id)
		if o.Status != 200 || o.Body.Status != hongbao.Opened {
			t.Fatalf("open %s: %s", id, o)
		}
		d := c.Client.Detail(opener, id)
		mine := false
		for _, r := range d.Body.Records {
			mine = mine || r.User == opener.String() && r.Amount == o.Body.Amount
		}
		if d.Status != 200 || !mine {
			fails = append(fails, fmt.Sprintf("open %d: GET %s right after opening %d: %s", i, id, o.Body.Amount, d))
		}
	}
	// The reads must have gone to the replica (2 statements each), or
	// this test shows nothing: the sender's reads at least, once its
	// packet is funded there.
	if n := selects() - before; n < rounds {
		t.Errorf("%d statements on the replica during %d detail reads: the replica served (almost) none", n, 2*rounds)
	} else {
		t.Logf("%d SELECTs on the replica during %d detail reads", n, 2*rounds)
	}
	for _, f := range fails {
		t.Error(f)
	}
	if len(fails) > 0 {
		t.Errorf("%d of %d reads did not read back the reader's own write", len(fails), 2*rounds)
	}
}
