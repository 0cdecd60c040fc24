package packets_test

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
	"github.com/hongbao-dev/hongbao/router"
)

// TestClusterServerRefusesUnsignedRequests: a SET server takes only
// requests a router signed. A user's Bearer token alone, a forged or stale
// signature or one under another secret is refused with 403 forbidden, and
// nothing is written.
func TestClusterServerRefusesUnsignedRequests(t *testing.T) {
	c := packettest.Start(t)
	topo := c.Topology(t)
	setA := c.Sets[0].Name
	ownedByA := func(b hongbao.Bucket) bool { return topo.Owner(b).Name == setA }
	sender := c.RichUser(t)
	key, bucket := packettest.BucketKey(t, sender, ownedByA)
	minted, err := hongbao.NewMinter(time.Now).Next(bucket)
	if err != nil {
		t.Fatal(err)
	}
	good := api.NewInternal([]byte(c.InternalSecret), time.Now)
	wrongSecret := api.NewInternal([]byte("not-the-internal-secret-0123456789"), time.Now)
	stale := api.NewInternal([]byte(c.InternalSecret), func() time.Time { return time.Now().Add(-5 * time.Minute) })
	forge := func(user hongbao.UserID) func(*http.Request) {
		return func(r *http.Request) {
			sig := make([]byte, 32)
			_, _ = rand.Read(sig)
			r.Header.Set(api.HeaderUser, user.String())
			r.Header.Set(api.HeaderTime, strconv.FormatInt(time.Now().Unix(), 10))
			r.Header.Set(api.HeaderSig, base64.RawURLEncoding.EncodeToString(sig))
		}
	}
	type attack struct {
		name string
		prep func(r *http.Request, user hongbao.UserID)
	}
	attacks := []attack{
		{"bearer token only", func(*http.Request, hongbao.UserID) {}},
		{"forged X-Hb-Sig", func(r *http.Request, u hongbao.UserID) { forge(u)(r) }},
		{"signed under another secret", func(r *http.Request, u hongbao.UserID) { wrongSecret.Sign(r, u) }},
		{"signature 5 minutes old", func(r *http.Request, u hongbao.UserID) { stale.Sign(r, u) }},
		{"signature of another user", func(r *http.Request, u hongbao.UserID) {
			good.Sign(r, dbtest.FreshUser())
			r.Header.Set(api.HeaderUser, u.String())
		}},
	}
	for _, srv := range c.Sets[0].Addrs {
		for _, a := range attacks {
			for _, withID := range []bool{false, true} {
				hdr := map[string]string{"Idempotency-Key": key}
				if withID {
					hdr[api.HeaderPacketID] = minted.String()
				}
				req := c.Request(http.MethodPost, "http://"+srv+"/v1/packets", sender, packettest.SendBody{Total: 500, Count: 5, Type: "random"}.JSON(), hdr)
				a.prep(req, sender)
				if r := c.Do(req); !r.IsProblem(http.StatusForbidden, "forbidden") {
					t.Errorf("send straight to %s, %s (packet id header %v): %v, want 403 forbidden", srv, a.name, withID, r)
				}
			}
		}
	}

	// Opens and reads of an existing packet, straight to its servers.
	victimSender := c.RichUser(t)
	pkt := c.MustSend(t, victimSender, packettest.SendBody{Total: 500, Count: 5, Type: "random"}, "")
	if pkt == 0 {
		return
	}
	owner, _ := router.Route(topo, pkt, nil)
	opener := dbtest.FreshUser()
	for _, srv := range owner.Servers {
		for _, a := range attacks {
			for _, method := range []string{http.MethodPost, http.MethodGet} {
				path := "/v1/packets/" + pkt.String()
				if method == http.MethodPost {
					path += "/open"
				}
				req := c.Request(method, "http://"+srv+path, opener, nil, nil)
				a.prep(req, opener)
				if r := c.Do(req); !r.IsProblem(http.StatusForbidden, "forbidden") {
					t.Errorf("%s %s straight to %s, %s: %v, want 403 forbidden", method, path, srv, a.name, r)
				}
			}
		}
	}

	// Nothing was written.
	day := minted.Table(c.Loc)
	rowsOf := func(u hongbao.UserID) (packets, keys int) { return c.SenderRows(t, day, u, "") }
	if packets, keys := rowsOf(sender); packets != 0 || keys != 0 {
		t.Errorf("refused sends wrote %d packet rows and %d idempotency rows", packets, keys)
	}
	if got := c.Balance(t, sender); got != 100_000_000 {
		t.Errorf("refused sends moved money: balance %d", got)
	}
	if p := c.CheckPacket(t, topo, pkt); p != nil && (len(p.Shares) != 0 || p.RemainingCount != p.Count) {
		t.Errorf("refused opens changed packet %s: %+v", pkt, *p)
	}

	// The control: the same send, signed by the router's secret, is taken,
	// so the refusals above were the signature's doing.
	req := c.Request(http.MethodPost, "http://"+c.Sets[0].Addrs[0]+"/v1/packets", 0, packettest.SendBody{Total: 500, Count: 5, Type: "random"}.JSON(),
		map[string]string{"Idempotency-Key": key, api.HeaderPacketID: minted.String()})
	good.Sign(req, sender)
	if r := c.Do(req); r.Status != http.StatusCreated || r.Str("id") != minted.String() {
		t.Errorf("properly signed send straight to a server: %v", r)
	}
	if packets, keys := rowsOf(sender); packets != 1 || keys != 1 {
		t.Errorf("signed send wrote %d packet rows and %d idempotency rows, want 1 and 1", packets, keys)
	}
	if got := c.Balance(t, sender); got != 100_000_000-500 {
		t.Errorf("signed send: balance %d, want %d", got, 100_000_000-500)
	}
}
