// Package packettest is the packets' harness of the end-to-end tests
// (e2e/packets, e2e/failover, e2e/metrics; issue 3): a clustertest cluster
// of real hbrouter, hbserver and hbctl processes over private MariaDB and
// memcached instances, the requests the tests make through the router like
// any client or straight to the servers (send, open, detail, with their
// retries), and what they assert on the SETs' rows with the tests' own SQL
// (dbtest), straight from each SET's MySQL.
//
// This file holds the cluster and the requests; checks.go holds what the
// tests assert on the SETs' rows.
package packettest

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
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Cluster is a clustertest cluster of two SETs of two servers and a router,
// with no settler: every share's wallet credit stays in its SET's outbox,
// where CheckPacket finds it.
type Cluster struct {
	*clustertest.Cluster
	Loc    *time.Location // the time zone of the day tables
	MetaDB *sql.DB        // a pool on the meta database
}

// Start starts the cluster for one test and opens its meta database.
func Start(t *testing.T) *Cluster {
	t.Helper()
	return StartLimited(t, "") // no abuse limits: tests load the cluster
}

// StartLimited is Start with the router's abuse limits given
// as YAML of its section.
func StartLimited(t *testing.T, routerYAML string) *Cluster {
	t.Helper()
	return StartWith(t, clustertest.Options{NoSettlers: true, RouterYAML: routerYAML})
}

// StartWith starts a cluster shaped by opts (settlers, skewed clocks...)
// for one test and opens its meta database.
func StartWith(t *testing.T, opts clustertest.Options) *Cluster {
	t.Helper()
	rc := clustertest.Start(t, opts)
	meta, err := sqldb.Open(rc.MetaDSN, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { meta.Close() })
	return &Cluster{Cluster: rc, Loc: dbtest.Shanghai(t), MetaDB: meta}
}

// RichUser returns a fresh user with enough money for any test.
func (c *Cluster) RichUser(t testing.TB) hongbao.UserID {
	t.Helper()
	u := dbtest.FreshUser()
	c.TopUp(t, u, 100_000_000)
	return u
}

// Balance reads user's wallet balance.
func (c *Cluster) Balance(t testing.TB, user hongbao.UserID) int64 {
	t.Helper()
	b, err := c.Wallet().Balance(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Call sends a request through the router as user (0: no token).
func (c *Cluster) Call(method, path string, user hongbao.UserID, body []byte, hdr map[string]string) clustertest.Reply {
	return c.Do(c.Request(method, c.URL()+path, user, body, hdr))
}

// SendBody is the JSON of a send.
type SendBody struct {
	Total    int64  `json:"total"`
	Count    int    `json:"count"`
	Type     string `json:"type"`
	Greeting string `json:"greeting"`
}

// JSON is the body of the send.
func (b SendBody) JSON() []byte {
	raw, err := json.Marshal(b)
	if err != nil {
		panic(err)
	}
	return raw
}

// Send posts a packet through the router; key "" sends no Idempotency-Key.
func (c *Cluster) Send(user hongbao.UserID, b SendBody, key string) clustertest.Reply {
	var hdr map[string]string
	if key != "" {
		hdr = map[string]string{"Idempotency-Key": key}
	}
	return c.Call(http.MethodPost, "/v1/packets", user, b.JSON(), hdr)
}

// MustSend sends until created (503 answers retried briefly) and returns the
// packet's ID. Safe in any goroutine: it reports with Errorf and returns 0.
func (c *Cluster) MustSend(t testing.TB, user hongbao.UserID, b SendBody, key string) hongbao.PacketID {
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := c.Send(user, b, key)
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

// Open opens packet id through the router as user, once.
func (c *Cluster) Open(user hongbao.UserID, id hongbao.PacketID) clustertest.Reply {
	return c.Call(http.MethodPost, "/v1/packets/"+id.String()+"/open", user, nil, nil)
}

// Detail reads packet id through the router as user.
func (c *Cluster) Detail(user hongbao.UserID, id hongbao.PacketID) clustertest.Reply {
	return c.Call(http.MethodGet, "/v1/packets/"+id.String(), user, nil, nil)
}

// ReplyID is the packet ID of a send's answer.
func ReplyID(t testing.TB, r clustertest.Reply) hongbao.PacketID {
	t.Helper()
	id, err := hongbao.ParsePacketID(r.Str("id"))
	if err != nil {
		t.Fatalf("answer %v: id %q: %v", r, r.Str("id"), err)
	}
	return id
}

// RetryPolicy says which answers OpenFinal retries.
type RetryPolicy int

const (
	RetryBusy   RetryPolicy = iota // 503 only
	RetryAny5xx                    // 503, every other 5xx and transport errors
)

// OpenAnswer is the final answer one client got.
type OpenAnswer struct {
	User    hongbao.UserID
	Packet  hongbao.PacketID
	R       clustertest.Reply
	Retries int
	Took    time.Duration
}

// OpenFinal opens until the answer is final or the deadline passes,
// sleeping a little between tries.
func (c *Cluster) OpenFinal(user hongbao.UserID, id hongbao.PacketID, policy RetryPolicy, within time.Duration) OpenAnswer {
	began := time.Now()
	deadline := began.Add(within)
	retries := 0
	for {
		r := c.Open(user, id)
		retry := r.Status == http.StatusServiceUnavailable
		if policy == RetryAny5xx {
			retry = retry || r.Err != nil || r.Status >= 500
		}
		if !retry || time.Now().After(deadline) {
			return OpenAnswer{User: user, Packet: id, R: r, Retries: retries, Took: time.Since(began)}
		}
		retries++
		time.Sleep(time.Duration(10+mrand.IntN(30)) * time.Millisecond)
	}
}

// Topology reads the current topology from the meta database.
func (c *Cluster) Topology(t testing.TB) *topology.Map {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topo, err := topology.Load(ctx, c.MetaDB)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// BucketKey returns an Idempotency-Key whose bucket for sender satisfies ok.
func BucketKey(t testing.TB, sender hongbao.UserID, ok func(hongbao.Bucket) bool) (string, hongbao.Bucket) {
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
