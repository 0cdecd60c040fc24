package rebalance_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/schema"
)

// TestArchivedPacketsMoveWithTheirBucket covers the defects of issue 13's
// list: an archived packet reads the same through the router after its
// bucket moved (its archive tables move with it; they used to stay behind
// and the packet answered 404), and a day copied to the archive by a run
// that stopped before its purge leaves no orphan copy on the old SET
// (hbctl verify used to count it forever).
func TestArchivedPacketsMoveWithTheirBucket(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000})
	a, b := c.Sets[0].Name, c.Sets[1].Name
	own := ctltest.BucketsOf(t, c, a)
	archived, _ := ctltest.SendInto(t, c, own[5], 3, 3)    // sold out, then archived
	interrupted, _ := ctltest.SendInto(t, c, own[9], 3, 3) // copied to the archive, not purged
	ctltest.WaitOutbox(t, c)
	before := map[hongbao.PacketID]string{archived: detail(t, c, archived), interrupted: detail(t, c, interrupted)}

	loc := dbtest.Shanghai(t)
	asOf := time.Now().In(loc).AddDate(0, 0, 9).Format(time.DateOnly)
	c.MustCtl(t, "archive", "run", "--set", a, "--as-of", asOf)
	packets, _ := dbtest.Tables(t, archived)
	if n := dbtest.Count(t, c.DB(a), "SELECT COUNT(*) FROM "+packets+" WHERE id = ?", archived); n != 0 {
		t.Fatalf("packet %s still live after the archive run", archived)
	}
	cold := schema.ArchiveTable{Bucket: archived.Bucket(), Date: archived.Time().In(loc).Format("20060102")}
	if n := dbtest.Count(t, c.DB(a), "SELECT COUNT(*) FROM "+cold.Packets()+" WHERE id = ?", archived); n != 1 {
		t.Fatalf("packet %s not in %s after the archive run", archived, cold.Packets())
	}
	// The interrupted run: the second packet's day copied into its
	// archive table on SET a, never purged. (The archive run above
	// archived it too; put it back live, as before the purge.)
	half := schema.ArchiveTable{Bucket: interrupted.Bucket(), Date: cold.Date}
	live, liveDetails := dbtest.Tables(t, interrupted)
	for _, q := range []string{
		"INSERT INTO " + live + " SELECT * FROM " + half.Packets() + " WHERE id = ?",
		"INSERT INTO " + liveDetails + " SELECT * FROM " + half.Details() + " WHERE packet_id = ?",
	} {
		if _, err := c.DB(a).Exec(q, interrupted); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range before {
		if got := detail(t, c, id); got != want {
			t.Errorf("packet %s before the move reads\n%s\nwas\n%s", id, got, want)
		}
	}

	for _, id := range []hongbao.PacketID{archived, interrupted} {
		c.MustCtl(t, "topology", "move", "--bucket", strconv.Itoa(int(id.Bucket())), "--to", b)
	}
	for id, want := range before {
		if got := detail(t, c, id); got != want {
			t.Errorf("packet %s after its bucket moved reads\n%s\nwas\n%s", id, got, want)
		}
	}
	for _, tbl := range []string{cold.Packets(), half.Packets()} {
		if dbtest.TableExists(t, c.DB(a), tbl) {
			if n := dbtest.Count(t, c.DB(a), "SELECT COUNT(*) FROM "+tbl); n != 0 {
				t.Errorf("SET %s keeps %d rows of %s after its bucket moved", a, n, tbl)
			}
		}
	}
	if n := dbtest.Count(t, c.DB(b), "SELECT COUNT(*) FROM "+cold.Packets()+" WHERE id = ?", archived); n != 1 {
		t.Errorf("SET %s's archive lacks packet %s after the move", b, archived)
	}
	// The moved interrupted day is archived by its new owner.
	c.MustCtl(t, "archive", "run", "--set", b, "--as-of", asOf)
	if got := detail(t, c, interrupted); got != before[interrupted] {
		t.Errorf("packet %s after SET %s archived it reads\n%s\nwas\n%s", interrupted, b, got, before[interrupted])
	}
	ctltest.WaitOutbox(t, c)
	c.CheckInvariants(t)
}

// detail reads a packet through the router as its sender's friend would:
// its money and every record, as text to compare.
func detail(t *testing.T, c *clustertest.Cluster, id hongbao.PacketID) string {
	t.Helper()
	r := c.Client.Retrying(10*time.Second).Detail(ctltest.User(), id.String())
	if r.Status != http.StatusOK {
		t.Fatalf("detail of %s: %v", id, r)
	}
	s := fmt.Sprintf("total %d count %d remaining %d/%d status %s;", r.Body.Total, r.Body.Count, r.Body.RemainingAmount,
		r.Body.RemainingCount, r.Body.Status)
	for _, rec := range r.Body.Records {
		s += fmt.Sprintf(" %s:%d", rec.User, rec.Amount)
	}
	return s
}
