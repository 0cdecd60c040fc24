package clock_test

import (
	"net/http"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
)

// host stands for a router on the host of one skewed SET server: it signs
// with that host's clock and sends straight to the server. A router on
// another host could not reach it (its signatures would be minutes off,
// outside api.Window), so this is how a skewed server takes requests.
type host struct {
	c    *packettest.Cluster
	addr string // the server's listen address
	auth *api.Internal
	http *http.Client
}

// onHost is the host of server (e.g. "a1") of SET s, whose clock is off by
// offset.
func onHost(t *testing.T, c *packettest.Cluster, set string, server int, offset time.Duration) *host {
	t.Helper()
	s := c.Set(set)
	now := func() time.Time { return time.Now().Add(offset) }
	return &host{c: c, addr: s.Addrs[server], auth: api.NewInternal([]byte(c.InternalSecret), now),
		http: &http.Client{Timeout: 30 * time.Second}}
}

// do sends one signed request as user.
func (h *host) do(t *testing.T, method, path string, user hongbao.UserID, body []byte) clustertest.Reply {
	t.Helper()
	req, err := clustertest.NewRequest(method, "http://"+h.addr+path, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.auth.Sign(req, user); err != nil {
		t.Fatal(err)
	}
	return clustertest.Do(h.http, req)
}

// send sends a packet of total fen in count shares as sender.
func (h *host) send(t *testing.T, sender hongbao.UserID, total int64, count int) hongbao.PacketID {
	t.Helper()
	r := h.do(t, http.MethodPost, "/v1/packets", sender, packettest.SendBody{Total: total, Count: count, Type: "random"}.JSON())
	if r.Status != http.StatusCreated {
		t.Fatalf("send on %s: %v", h.addr, r)
	}
	return packettest.ReplyID(t, r)
}

// open opens packet id as user.
func (h *host) open(t *testing.T, user hongbao.UserID, id hongbao.PacketID) clustertest.Reply {
	t.Helper()
	return h.do(t, http.MethodPost, "/v1/packets/"+id.String()+"/open", user, nil)
}
