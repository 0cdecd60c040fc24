package packets_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
)

// capture is a signed router -> server request as seen on the wire: its
// headers and body, to be sent again as an attacker would.
type capture struct {
	method, path string
	header       http.Header
	body         []byte
}

// captureSend signs a send of body for sender to server srv with minted
// as its packet ID, as the router does, without sending it.
func captureSend(t *testing.T, signer *api.Internal, srv string, sender hongbao.UserID, minted hongbao.PacketID, key string, body []byte) capture {
	t.Helper()
	req, err := clustertest.NewRequest(http.MethodPost, "http://"+srv+"/v1/packets", body,
		map[string]string{api.HeaderPacketID: minted.String(), "Idempotency-Key": key})
	if err != nil {
		t.Fatal(err)
	}
	signer.Sign(req, sender)
	return capture{method: req.Method, path: req.URL.RequestURI(), header: req.Header.Clone(), body: body}
}

// replay sends the captured headers with body to server srv.
func replay(c *packettest.Cluster, t *testing.T, cp capture, srv string, body []byte) clustertest.Reply {
	t.Helper()
	req, err := http.NewRequest(cp.method, "http://"+srv+cp.path, io.NopCloser(bytes.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	req.Header = cp.header.Clone()
	return c.Do(req)
}

// TestClusterCapturedInternalRequests: whoever sees router -> server
// traffic can neither rewrite a signed request's body, nor send it again,
// nor take it to another server of the SET, nor use it once it is stale
// (issue 12, problem 1: on b958a97 a refused send's signed headers took
// any body to any server of the SET within 30 s, debiting the sender).
func TestClusterCapturedInternalRequests(t *testing.T) {
	c := packettest.Start(t)
	topo := c.Topology(t)
	setA := c.Sets[0]
	ownedByA := func(b hongbao.Bucket) bool { return topo.Owner(b).Name == setA.Name }
	signer := api.NewInternal([]byte(c.InternalSecret), time.Now)
	sender := c.RichUser(t)
	key, bucket := packettest.BucketKey(t, sender, ownedByA)
	mint := func() hongbao.PacketID {
		id, err := hongbao.NewMinter(time.Now).Next(bucket)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	small := packettest.SendBody{Total: 500, Count: 5, Type: "random"}.JSON()
	large := packettest.SendBody{Total: 20000, Count: 1, Type: "random"}.JSON()
	tooLarge := packettest.SendBody{Total: 20001, Count: 1, Type: "random"}.JSON() // over max_total: 400, its ID unused

	// A send the server refused: its signed headers carry a good body.
	refused := captureSend(t, signer, setA.Addrs[0], sender, mint(), key, tooLarge)
	if r := replay(c, t, refused, setA.Addrs[0], tooLarge); !r.IsProblem(http.StatusBadRequest, "total_over_limit") {
		t.Fatalf("the genuine refused send: %v, want 400 total_over_limit", r)
	}
	for _, srv := range setA.Addrs {
		if r := replay(c, t, refused, srv, large); !r.IsProblem(http.StatusForbidden, "forbidden") {
			t.Errorf("refused send's headers with another body to %s: %v, want 403 forbidden", srv, r)
		}
	}

	// A genuine send: rewritten, it is refused; as sent, it is taken once.
	genuine := captureSend(t, signer, setA.Addrs[0], sender, mint(), key, small)
	if r := replay(c, t, genuine, setA.Addrs[0], large); !r.IsProblem(http.StatusForbidden, "forbidden") {
		t.Errorf("genuine send with a rewritten body: %v, want 403 forbidden", r)
	}
	if r := replay(c, t, genuine, setA.Addrs[1], small); !r.IsProblem(http.StatusForbidden, "forbidden") {
		t.Errorf("genuine send taken to the other server %s: %v, want 403 forbidden", setA.Addrs[1], r)
	}
	if r := replay(c, t, genuine, setA.Addrs[0], small); r.Status != http.StatusCreated {
		t.Fatalf("genuine send as signed: %v, want 201", r)
	}
	if r := replay(c, t, genuine, setA.Addrs[0], small); !r.IsProblem(http.StatusForbidden, "replayed") {
		t.Errorf("genuine send replayed verbatim: %v, want 403 replayed", r)
	}

	// A signature older than the window.
	stale := api.NewInternal([]byte(c.InternalSecret), func() time.Time { return time.Now().Add(-api.Window - 2*time.Second) })
	old := captureSend(t, stale, setA.Addrs[0], sender, mint(), key+"-2", small)
	if r := replay(c, t, old, setA.Addrs[0], small); !r.IsProblem(http.StatusForbidden, "forbidden") {
		t.Errorf("send signed %v ago: %v, want 403 forbidden", api.Window+2*time.Second, r)
	}

	// Opens: a captured open cannot be replayed, nor taken elsewhere.
	pkt := packettest.ReplyID(t, c.Send(c.RichUser(t), packettest.SendBody{Total: 500, Count: 5, Type: "random"}, ""))
	owner := topo.Owner(pkt.Bucket())
	opener := c.RichUser(t)
	req := c.Request(http.MethodPost, "http://"+owner.Servers[0]+"/v1/packets/"+pkt.String()+"/open", 0, nil, nil)
	signer.Sign(req, opener)
	open := capture{method: req.Method, path: req.URL.RequestURI(), header: req.Header.Clone()}
	if r := replay(c, t, open, owner.Servers[1], nil); !r.IsProblem(http.StatusForbidden, "forbidden") {
		t.Errorf("open taken to the other server: %v, want 403 forbidden", r)
	}
	if r := replay(c, t, open, owner.Servers[0], nil); r.Status != http.StatusOK {
		t.Errorf("open as signed: %v, want 200", r)
	}
	if r := replay(c, t, open, owner.Servers[0], nil); !r.IsProblem(http.StatusForbidden, "replayed") {
		t.Errorf("open replayed: %v, want 403 replayed", r)
	}

	// What was written: one packet of 500 fen for the sender, nothing else.
	if got := c.Balance(t, sender); got != 100_000_000-500 {
		t.Errorf("sender's balance %d, want %d: a captured request moved money", got, 100_000_000-500)
	}
	if packets, keys := c.SenderRows(t, mint().Table(c.Loc), sender, ""); packets != 1 || keys != 1 {
		t.Errorf("sender has %d packet rows and %d idempotency rows, want 1 and 1", packets, keys)
	}
	if p := c.CheckPacket(t, topo, pkt); p != nil && len(p.Shares) != 1 {
		t.Errorf("packet %s has %d shares, want 1", pkt, len(p.Shares))
	}
}

// TestClusterSendSameIDOtherBody: a properly signed send under a packet
// ID that already holds another packet (a router minting an ID another one
// minted, or a client replaying with another body) is a 409 duplicate_id,
// not a 500, and changes nothing (issue 12, problem 3).
func TestClusterSendSameIDOtherBody(t *testing.T) {
	c := packettest.Start(t)
	topo := c.Topology(t)
	setA := c.Sets[0]
	signer := api.NewInternal([]byte(c.InternalSecret), time.Now)
	sender := c.RichUser(t)
	_, bucket := packettest.BucketKey(t, sender, func(b hongbao.Bucket) bool { return topo.Owner(b).Name == setA.Name })
	id, err := hongbao.NewMinter(time.Now).Next(bucket)
	if err != nil {
		t.Fatal(err)
	}
	send := func(body packettest.SendBody) clustertest.Reply {
		req := c.Request(http.MethodPost, "http://"+setA.Addrs[0]+"/v1/packets", 0, body.JSON(),
			map[string]string{api.HeaderPacketID: id.String()})
		signer.Sign(req, sender)
		return c.Do(req)
	}
	first := packettest.SendBody{Total: 500, Count: 5, Type: "random"}
	if r := send(first); r.Status != http.StatusCreated {
		t.Fatalf("first send: %v", r)
	}
	if r := send(first); r.Status != http.StatusCreated || r.Str("id") != id.String() {
		t.Errorf("the same send again (a router's retry): %v, want 201 with the same packet", r)
	}
	for _, other := range []packettest.SendBody{{Total: 900, Count: 5, Type: "random"}, {Total: 500, Count: 4, Type: "random"},
		{Total: 500, Count: 5, Type: "fixed"}, {Total: 500, Count: 5, Type: "random", Greeting: "x"}} {
		if r := send(other); !r.IsProblem(http.StatusConflict, "duplicate_id") {
			t.Errorf("send %+v under the same ID: %v, want 409 duplicate_id", other, r)
		}
	}
	if got := c.Balance(t, sender); got != 100_000_000-500 {
		t.Errorf("sender's balance %d, want %d", got, 100_000_000-500)
	}
	if p := c.CheckPacket(t, topo, id); p != nil && (p.Total != 500 || p.Count != 5) {
		t.Errorf("packet %s: total %d count %d, want 500 and 5", id, p.Total, p.Count)
	}
}
