// Package ctltest is the harness of the whole-cluster tests that drive
// hbctl (e2e/rebalance, e2e/verify, e2e/failover, e2e/watch, e2e/archive):
// a cluster of real processes (e2e/harness/clustertest), packets sent into
// chosen buckets, their shares as each SET's MySQL holds them, the journal
// as hbctl shows it, a load of sends and opens timed through a fault, and
// the mover run in the test's process with knobs at its steps.
package ctltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// users numbers the test's users apart from other tests': a random start
// (dbtest.FreshUser) because the e2e packages are test processes of their
// own, run at once on the shared MariaDB, and a sequence after it because
// a test's load needs thousands of users, none seen twice.
var users atomic.Int64

func init() { users.Store(int64(dbtest.FreshUser()) >> 8) }

// User is a user no other test uses.
func User() hongbao.UserID { return hongbao.UserID(users.Add(1)) }

// OwnerOf returns the SET owning bucket b in the meta database.
func OwnerOf(t testing.TB, c *clustertest.Cluster, b hongbao.Bucket) string {
	t.Helper()
	var name string
	if err := c.Meta().QueryRow("SELECT set_name FROM hb_meta.buckets WHERE bucket = ?", int(b)).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

// BucketsOf lists the buckets SET name owns.
func BucketsOf(t testing.TB, c *clustertest.Cluster, name string) []hongbao.Bucket {
	t.Helper()
	rows, err := c.Meta().Query("SELECT bucket FROM hb_meta.buckets WHERE set_name = ? ORDER BY bucket", name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var bs []hongbao.Bucket
	for rows.Next() {
		var b int
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		bs = append(bs, hongbao.Bucket(b))
	}
	return bs
}

// SendInto sends a packet of count shares into bucket b through the
// router and opens opens of them; it returns the packet and the shares
// the router answered.
func SendInto(t testing.TB, c *clustertest.Cluster, b hongbao.Bucket, count, opens int) (hongbao.PacketID, map[hongbao.UserID]int64) {
	t.Helper()
	sender := User()
	cl := c.Client.Retrying(10 * time.Second)
	r := cl.Send(sender, hongbao.SendRequest{Total: int64(100 * count), Count: count, Type: hongbao.Random}, KeyInto(sender, b))
	if r.Status != http.StatusCreated && r.Status != http.StatusOK {
		t.Fatalf("send into bucket %d: %v", b, r)
	}
	id, err := hongbao.ParsePacketID(r.Body.ID)
	if err != nil || id.Bucket() != b {
		t.Fatalf("send into bucket %d made %q (%v)", b, r.Body.ID, err)
	}
	shares := map[hongbao.UserID]int64{}
	for range opens {
		u := User()
		o := cl.Open(u, id.String())
		if o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
			t.Fatalf("open %s: %v", id, o)
		}
		shares[u] = o.Body.Amount
	}
	return id, shares
}

// KeyInto returns an Idempotency-Key that puts sender's send into bucket b.
func KeyInto(sender hongbao.UserID, b hongbao.Bucket) string {
	for i := 0; ; i++ {
		key := "k-" + strconv.Itoa(i) + "-" + sender.String()
		if hongbao.BucketFor(sender, []byte(key)) == b {
			return key
		}
	}
}

// SharesOn reads packet id's shares from SET set's MySQL (nil: no such
// packet there).
func SharesOn(t testing.TB, c *clustertest.Cluster, set string, id hongbao.PacketID) map[hongbao.UserID]int64 {
	t.Helper()
	p := dbtest.ReadPacket(t, c.DB(set), id)
	if p == nil {
		return nil
	}
	return p.Shares
}

// SameShares fails unless got holds every share of want with its amount.
func SameShares(t testing.TB, what string, got, want map[hongbao.UserID]int64) {
	t.Helper()
	for u, a := range want {
		if got[u] != a {
			t.Errorf("%s: user %s has %d fen, was answered %d", what, u, got[u], a)
		}
	}
}

// Status reads `hbctl rebalance status --json`.
type Status struct {
	ID        int64          `json:"id"`
	Kind      string         `json:"kind"`
	State     string         `json:"state"`
	Done      int            `json:"done"`
	Moves     int            `json:"moves"`
	Steps     map[string]int `json:"steps"`
	FreezeMax int            `json:"freeze_ms_max"`
	FreezeP99 int            `json:"freeze_ms_p99"`
	List      []struct {
		Bucket   int    `json:"bucket"`
		Step     string `json:"step"`
		Error    string `json:"error"`
		FreezeMS int    `json:"freeze_ms"`
	} `json:"list"`
}

func RebalanceStatus(t testing.TB, c *clustertest.Cluster) Status {
	t.Helper()
	out := c.MustCtl(t, "rebalance", "status", "--json")
	var s Status
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("rebalance status --json: %v\n%s", err, out)
	}
	return s
}

func (s Status) String() string {
	return fmt.Sprintf("rebalance %d (%s) %s: %d/%d done, steps %v", s.ID, s.Kind, s.State, s.Done, s.Moves, s.Steps)
}
