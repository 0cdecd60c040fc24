package router_test

// Integration tests of the whole cluster (issue 3): real hbrouter, hbserver
// and hbctl processes over private MariaDB and memcached instances
// (clustertest), and the tests talk HTTP to the router like any client, or
// straight to the servers. The invariants are checked with the tests' own
// SQL (dbtest), straight from each SET's MySQL.
//
// This file holds the cluster they start and the requests they make;
// checks_test.go holds what they assert on the SETs' rows.

import (
	"context"
	"database/sql"
	"encoding/json"
	mrand "math/rand/v2"
	"net/http"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// cluster is a clustertest cluster of two SETs of two servers and a router,
// with no settler: every share's wallet credit stays in its SET's outbox,
// where checkPacket finds it.
type cluster struct {
	*clustertest.Cluster
	loc  *time.Location
	meta *sql.DB
}

// startCluster starts the cluster for one test and opens its meta database.
func startCluster(t *testing.T) *cluster {
	t.Helper()
	return startLimitedCluster(t, "") // no abuse limits: tests load the cluster
}

// richUser returns a fresh user with enough money for any test.
func (c *cluster) richUser(t testing.TB) hongbao.UserID {
	t.Helper()
	u := dbtest.FreshUser()
	c.TopUp(t, u, 100_000_000)
	return u
}

// balance reads user's wallet balance.
func (c *cluster) balance(t testing.TB, user hongbao.UserID) int64 {
	t.Helper()
	b, err := c.Wallet().Balance(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// do sends a request through the router as user (0: no token).
func (c *cluster) do(method, path string, user hongbao.UserID, body []byte, hdr map[string]string) clustertest.Reply {
	return c.Do(c.Request(method, c.URL()+path, user, body, hdr))
}

// sendBody is the JSON of a send.
type sendBody struct {
	Total    int64  `json:"total"`
	Count    int    `json:"count"`
	Type     string `json:"type"`
	Greeting string `json:"greeting"`
}

func (b sendBody) json() []byte {
	raw, err := json.Marshal(b)
	if err != nil {
		panic(err)
	}
	return raw
}

// send posts a packet through the router; key "" sends no Idempotency-Key.
func (c *cluster) send(user hongbao.UserID, b sendBody, key string) clustertest.Reply {
	var hdr map[string]string
	if key != "" {
		hdr = map[string]string{"Idempotency-Key": key}
	}
	return c.do(http.MethodPost, "/v1/packets", user, b.json(), hdr)
}

// mustSend sends until created (503 answers retried briefly) and returns the
// packet's ID. Safe in any goroutine: it reports with Errorf and returns 0.
func (c *cluster) mustSend(t testing.TB, user hongbao.UserID, b sendBody, key string) hongbao.PacketID {
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := c.send(user, b, key)
		if r.Status == http.StatusCreated {
			id, err := hongbao.ParsePacketID(r.Str("id"))
			if err != nil {
				t.Errorf("send answered id %q: %v", r.Str("id"), err)
			}
			return id
		}
		if (r.Err == nil && r.Status != http.StatusServiceUnavailable) || time.Now().After(deadline) {
			t.Errorf("send %+v as %s: %v", b, user, r)
			return 0
		}
		time.Sleep(time.Duration(10+mrand.IntN(20)) * time.Millisecond)
	}
}

// open opens packet id through the router as user, once.
func (c *cluster) open(user hongbao.UserID, id hongbao.PacketID) clustertest.Reply {
	return c.do(http.MethodPost, "/v1/packets/"+id.String()+"/open", user, nil, nil)
}

// detail reads packet id through the router as user.
func (c *cluster) detail(user hongbao.UserID, id hongbao.PacketID) clustertest.Reply {
	return c.do(http.MethodGet, "/v1/packets/"+id.String(), user, nil, nil)
}

// replyID is the packet ID of a send's answer.
func replyID(t testing.TB, r clustertest.Reply) hongbao.PacketID {
	t.Helper()
	id, err := hongbao.ParsePacketID(r.Str("id"))
	if err != nil {
		t.Fatalf("answer %v: id %q: %v", r, r.Str("id"), err)
	}
	return id
}

// retryPolicy says which answers openFinal retries.
type retryPolicy int

const (
	retryBusy   retryPolicy = iota // 503 only
	retryAny5xx                    // 503, every other 5xx and transport errors
)

// openAnswer is the final answer one client got.
type openAnswer struct {
	User    hongbao.UserID
	Packet  hongbao.PacketID
	R       clustertest.Reply
	Retries int
	Took    time.Duration
}

// openFinal opens until the answer is final or the deadline passes,
// sleeping a little between tries.
func (c *cluster) openFinal(user hongbao.UserID, id hongbao.PacketID, policy retryPolicy, within time.Duration) openAnswer {
	began := time.Now()
	deadline := began.Add(within)
	retries := 0
	for {
		r := c.open(user, id)
		retry := r.Status == http.StatusServiceUnavailable
		if policy == retryAny5xx {
			retry = retry || r.Err != nil || r.Status >= 500
		}
		if !retry || time.Now().After(deadline) {
			return openAnswer{User: user, Packet: id, R: r, Retries: retries, Took: time.Since(began)}
		}
		retries++
		time.Sleep(time.Duration(10+mrand.IntN(30)) * time.Millisecond)
	}
}

// topology reads the current topology from the meta database.
func (c *cluster) topology(t testing.TB) *topology.Map {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topo, err := topology.Load(ctx, c.meta)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// bucketKey returns an Idempotency-Key whose bucket for sender satisfies ok.
func bucketKey(t testing.TB, sender hongbao.UserID, ok func(hongbao.Bucket) bool) (string, hongbao.Bucket) {
	t.Helper()
	for range 100_000 {
		key := dbtest.UniqueName("k-")
		if b := hongbao.BucketFor(sender, []byte(key)); ok(b) {
			return key, b
		}
	}
	t.Fatal("no idempotency key found for the wanted buckets")
	return "", 0
}
