package packets_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
)

// TestClusterHTTP2: the router speaks HTTP/2 in clear (prior knowledge)
// beside HTTP/1.1. A send, a crowd's opens multiplexed over HTTP/2 (each
// answer checked against MySQL), bad input answered as a problem, and
// the per-connection stream cap (max_streams_per_conn: 4) advertised: a
// crowd of 30 at once needs more than one connection. Before, the router
// answered HTTP/2's preface as a malformed HTTP/1 request.
func TestClusterHTTP2(t *testing.T) {
	c := packettest.StartLimited(t, "max_streams_per_conn: 4\n")
	var dials atomic.Int64
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
	}}
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	call := func(method, path string, user hongbao.UserID, body []byte) clustertest.Reply {
		return clustertest.Do(hc, c.Request(method, c.URL()+path, user, body, nil))
	}

	sender := c.RichUser(t)
	r := call(http.MethodPost, "/v1/packets", sender, packettest.SendBody{Total: 1000, Count: 20, Type: "random"}.JSON())
	if r.Status != http.StatusCreated || r.Proto != "HTTP/2.0" {
		t.Fatalf("send over HTTP/2: %s %v", r.Proto, r)
	}
	id := packettest.ReplyID(t, r)
	if r := call(http.MethodPost, "/v1/packets/12x/open", sender, nil); !r.IsProblem(http.StatusBadRequest, "invalid_id") || r.Proto != "HTTP/2.0" {
		t.Errorf("a bad ID over HTTP/2: %s %v, want 400 invalid_id", r.Proto, r)
	}

	users := make([]hongbao.UserID, 30)
	answers := make([]packettest.OpenAnswer, len(users))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range users {
		users[i] = dbtest.FreshUser()
		wg.Go(func() {
			<-start
			began := time.Now()
			for tries := 0; ; tries++ {
				r := call(http.MethodPost, "/v1/packets/"+id.String()+"/open", users[i], nil)
				if r.Status != http.StatusServiceUnavailable || time.Since(began) > 30*time.Second {
					answers[i] = packettest.OpenAnswer{User: users[i], Packet: id, R: r, Retries: tries}
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, a := range answers {
		if a.R.Proto != "HTTP/2.0" {
			t.Errorf("user %s answered over %q: %v", a.User, a.R.Proto, a.R)
		}
	}
	if opened := packettest.CheckAnswers(t, c.CheckPacket(t, c.Topology(t), id), answers); opened != 20 {
		t.Errorf("%d of 30 opens over HTTP/2 said opened, want the packet's 20 shares", opened)
	}
	if n := dials.Load(); n < 2 {
		t.Errorf("30 requests at once on %d connection: the router's cap of 4 streams a connection was not advertised", n)
	}
	// HTTP/1.1 beside it, on the same listener.
	if r := c.Open(dbtest.FreshUser(), id); !r.IsProblem(http.StatusConflict, "sold_out") || r.Proto != "HTTP/1.1" {
		t.Errorf("an open over HTTP/1.1 after the crowd: %s %v, want 409 sold_out", r.Proto, r)
	}
}
