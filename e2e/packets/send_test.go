package packets_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
)

// TestClusterPacketsLandOnBothSets: packets sent through the router are
// spread over both SETs, and each one's rows are in the MySQL of exactly the
// SET the topology says owns its bucket.
func TestClusterPacketsLandOnBothSets(t *testing.T) {
	c := packettest.Start(t)
	const n = 100
	sender := c.RichUser(t)
	bodies := make([]packettest.SendBody, n)
	ids := make([]hongbao.PacketID, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range ids {
		bodies[i] = packettest.SendBody{Total: int64(100 + i), Count: 1 + i%10, Type: "random", Greeting: "恭喜发财 " + strconv.Itoa(i)}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ids[i] = c.MustSend(t, sender, bodies[i], "")
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[hongbao.PacketID]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("packet ID %s answered twice", id)
		}
		seen[id] = true
	}
	topo := c.Topology(t)
	perSet := map[string]int{}
	for i, id := range ids {
		p := c.CheckPacket(t, topo, id)
		if p == nil {
			continue
		}
		perSet[p.Set]++
		b := bodies[i]
		if p.Sender != sender || p.Total != b.Total || p.Count != b.Count || p.Type != b.Type ||
			p.RemainingAmount != b.Total || p.RemainingCount != b.Count || len(p.Shares) != 0 {
			t.Errorf("packet %s stored as %+v, sent %+v by %s", id, *p, b, sender)
		}
	}
	for _, s := range c.Sets {
		if perSet[s.Name] == 0 {
			t.Errorf("no packet of %d landed on SET %s (per SET: %v)", n, s.Name, perSet)
		}
	}
	var debited int64
	for _, b := range bodies {
		debited += b.Total
	}
	if got := c.Balance(t, sender); got != 100_000_000-debited {
		t.Errorf("sender's balance %d after %d sends of %d fen in all, want %d", got, n, debited, 100_000_000-debited)
	}
	t.Logf("packets per SET: %v", perSet)
	// And the router finds each of them again.
	for i, id := range ids[:10] {
		r := c.Detail(dbtest.FreshUser(), id)
		if total, _ := r.Num("total"); r.Status != http.StatusOK || r.Str("id") != id.String() || total != bodies[i].Total {
			t.Errorf("detail of %s: %v", id, r)
		}
	}
}

// TestClusterIdempotentSend: the same send with the same Idempotency-Key,
// five times and partly at once, makes one packet (one ID, one row); the
// key reused for a different body is refused with 422.
func TestClusterIdempotentSend(t *testing.T) {
	c := packettest.Start(t)
	sender := c.RichUser(t)
	key := dbtest.UniqueName("idem-")
	body := packettest.SendBody{Total: 888, Count: 8, Type: "random", Greeting: "一次就好"}
	var replies [5]clustertest.Reply
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i] = c.Send(sender, body, key)
		}()
	}
	close(start)
	wg.Wait()
	replies[4] = c.Send(sender, body, key)
	var id hongbao.PacketID
	for i, r := range replies {
		if r.Status != http.StatusCreated {
			t.Errorf("send %d with the same key: %v", i+1, r)
			continue
		}
		got := packettest.ReplyID(t, r)
		if id == 0 {
			id = got
		} else if got != id {
			t.Errorf("send %d with the same key created packet %s, an earlier one %s", i+1, got, id)
		}
		if total, _ := r.Num("total"); total != body.Total {
			t.Errorf("send %d: %v", i+1, r)
		}
	}
	if t.Failed() {
		return
	}
	if want := hongbao.BucketFor(sender, []byte(key)); id.Bucket() != want {
		t.Errorf("packet %s is in bucket %d, DESIGN.md says xxhash(sender, key) picks %d", id, id.Bucket(), want)
	}
	topo := c.Topology(t)
	p := c.CheckPacket(t, topo, id)
	if p == nil {
		return
	}
	countRows := func() (packets, keys int) { return c.SenderRows(t, id.Table(c.Loc), sender, key) }
	if packets, keys := countRows(); packets != 1 || keys != 1 {
		t.Errorf("5 sends with one key left %d packet rows and %d idempotency rows, want 1 and 1", packets, keys)
	}
	var keyFor hongbao.PacketID
	if err := c.DB(p.Set).QueryRow("SELECT packet_id FROM "+id.Bucket().DB()+".t_idem WHERE sender = ? AND idem_key = ?",
		sender, key).Scan(&keyFor); err != nil || keyFor != id {
		t.Errorf("idempotency row on SET %s names packet %s (%v), want %s", p.Set, keyFor, err, id)
	}

	// The key reused for a different request is refused.
	for _, other := range []packettest.SendBody{
		{Total: 999, Count: 8, Type: "random", Greeting: body.Greeting},
		{Total: 888, Count: 8, Type: "fixed", Greeting: body.Greeting},
		{Total: 888, Count: 8, Type: "random", Greeting: "另一个"},
	} {
		if r := c.Send(sender, other, key); !r.IsProblem(http.StatusUnprocessableEntity, "idempotency_key_reused") {
			t.Errorf("send %+v with a used key: %v, want 422 idempotency_key_reused", other, r)
		}
	}
	if packets, keys := countRows(); packets != 1 || keys != 1 {
		t.Errorf("after the refused sends: %d packet rows and %d idempotency rows, want 1 and 1", packets, keys)
	}
	if got := c.Balance(t, sender); got != 100_000_000-body.Total {
		t.Errorf("sender's balance %d after one packet of %d sent 5 times, want %d (one debit)", got, body.Total, 100_000_000-body.Total)
	}
	// The key belongs to its sender: another sender's packet is another.
	if r := c.Send(c.RichUser(t), body, key); r.Status != http.StatusCreated || packettest.ReplyID(t, r) == id {
		t.Errorf("another sender with the same key: %v, want a new packet", r)
	}
}
