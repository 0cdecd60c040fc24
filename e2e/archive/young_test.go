package archive_test

import (
	"bufio"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestYoungArchivedPacketAnswersItsOpeners, from the outside: a packet
// with a short expiry, opened twice, expired, refunded and archived the
// same day (hbctl archive run --as-of a retention ahead). Then its server
// restarts and memcached evicts the openers' entries (it keeps the
// packet's state): an earlier opener's open again answers already_opened
// with their amount, and their grab already_opened (they answered 410
// expired and "expired": the share lookup only searched the archive for
// packets older than a day). Then memcached loses everything (a restart):
// a grab by an earlier opener still answers already_opened (it answered
// 503 busy: the grab's packet read did not look in the archive, and the
// not-found check found it there). A user who never opened it is told
// expired. Issue 23, finding 8.
func TestYoungArchivedPacketAnswersItsOpeners(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000, Sets: 1, ServersPerSet: 1, Expiry: 2 * time.Second})
	id, shares := ctltest.SendInto(t, c, ctltest.BucketsOf(t, c, "a")[0], 5, 2)
	packets, _ := dbtest.Tables(t, id)
	for deadline := time.Now().Add(60 * time.Second); dbtest.Count(t, c.DB("a"), "SELECT COUNT(*) FROM "+packets+" WHERE id = ? AND closed", id) == 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("packet %s not closed by the settler within 60 s of its expiry", id)
		}
	}
	ctltest.WaitOutbox(t, c)
	asOf := time.Now().In(dbtest.Shanghai(t)).AddDate(0, 0, 8).Format(time.DateOnly) // retention 7: today is due
	c.MustCtl(t, "archive", "run", "--set", "a", "--as-of", asOf)
	if n := dbtest.Count(t, c.DB("a"), "SELECT COUNT(*) FROM "+packets+" WHERE id = ?", id); n != 0 {
		t.Fatalf("packet %s still in its day table after the archive run", id)
	}
	check := func(when string) {
		t.Helper()
		for u, amount := range shares {
			if o := c.Client.Open(u, id.String()); o.Status != http.StatusOK || o.Body.Status != hongbao.AlreadyOpened || o.Body.Amount != amount {
				t.Errorf("%s: open by earlier opener %s of archived %s: %v; want already_opened %d", when, u, id, o, amount)
			}
			if g := c.Client.Grab(u, id.String()); g.Status != http.StatusOK || g.Body.CanOpen || g.Body.Reason != hongbao.AlreadyOpened {
				t.Errorf("%s: grab by earlier opener %s of archived %s: %v; want already_opened", when, u, id, g)
			}
		}
		if o := c.Client.Open(ctltest.User(), id.String()); o.Status != http.StatusGone || o.Code != "expired" {
			t.Errorf("%s: open by a new user of archived %s: %v; want 410 expired", when, id, o)
		}
	}
	c.Restart(clustertest.Server, "a1")
	keys := []string{}
	for u := range shares {
		keys = append(keys, "hb:u:"+id.String()+":"+u.String())
	}
	memcached(t, c.Set("a").Memcached, keys...)
	check("openers' cache entries evicted")
	memcached(t, c.Set("a").Memcached)
	check("memcached emptied")
}

// memcached deletes keys from the memcached at addr, as an eviction does;
// none: it empties it, as a restart does.
func memcached(t *testing.T, addr string, keys ...string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	cmds, want := []string{"flush_all"}, "OK"
	if len(keys) > 0 {
		cmds, want = nil, "DELETED NOT_FOUND" // a small packet's openers may never have been there
		for _, k := range keys {
			cmds = append(cmds, "delete "+k)
		}
	}
	r := bufio.NewReader(conn)
	for _, cmd := range cmds {
		if _, err := conn.Write([]byte(cmd + "\r\n")); err != nil {
			t.Fatal(err)
		}
		if line, err := r.ReadString('\n'); err != nil || !slices.Contains(strings.Fields(want), strings.TrimSpace(line)) {
			t.Fatalf("memcached %s: %q, %v; want %s", cmd, line, err, want)
		}
	}
}
