package rebalance_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/schema"
)

// TestMoveBigBucket: a bucket of 100,000 packets (and their expiry marks)
// moves while clients open its packets. The copy runs while the source
// serves: the freeze is a small part of the move (its time is logged and
// recorded in BENCHMARKS.md, not asserted). Every acknowledged open is on
// the target, which holds every packet.
func TestMoveBigBucket(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000})
	a, b := c.Sets[0].Name, c.Sets[1].Name
	bucket := ctltest.BucketsOf(t, c, a)[42]
	const n = 100_000
	table := fill(t, c, a, bucket, n)

	var mu sync.Mutex
	var acks []ctltest.Opened
	var errs []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	cl := c.Client.Retrying(15 * time.Second)
	ids := idsOf(t, c, a, table, 200)
	for w := range 8 {
		wg.Go(func() {
			for i := w; ; i += 8 {
				select {
				case <-stop:
					return
				default:
				}
				id, u := ids[i%len(ids)], ctltest.User()
				o := cl.Open(u, id.String())
				mu.Lock()
				if o.Status == http.StatusOK && o.Body.Status == hongbao.Opened {
					acks = append(acks, ctltest.Opened{ID: id, User: u, Amount: o.Body.Amount})
				} else if o.Status != http.StatusOK && o.Code != "sold_out" {
					errs = append(errs, o.String())
				}
				mu.Unlock()
			}
		})
	}
	began := time.Now()
	out := c.MustCtl(t, "topology", "move", "--bucket", strconv.Itoa(int(bucket)), "--to", b)
	took := time.Since(began)
	close(stop)
	wg.Wait()

	var moved struct {
		FreezeMS int              `json:"freeze_ms"`
		Parts    map[string]int64 `json:"freeze_parts_ms"`
		Rows     int64            `json:"rows_copied"`
		Passes   int              `json:"passes"`
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"event":"moved"`) {
			if err := json.Unmarshal(sc.Bytes(), &moved); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("bucket %d of %d packets moved in %v: freeze %d ms (%v), %d rows copied in %d passes, %d opens acknowledged meanwhile",
		bucket, n, took.Round(time.Millisecond), moved.FreezeMS, moved.Parts, moved.Rows, moved.Passes, len(acks))
	if moved.Rows < n || moved.Passes < 2 {
		t.Fatalf("move reported %+v, want >= %d rows and a pass under the freeze\n%s", moved, n, out)
	}
	if time.Duration(moved.FreezeMS)*time.Millisecond > took/2 {
		t.Errorf("the freeze (%d ms) is most of the move (%v): the copy ran fenced", moved.FreezeMS, took)
	}
	if got := dbtest.Count(t, c.DB(b), "SELECT COUNT(*) FROM "+table); got != n {
		t.Errorf("the target's %s holds %d packets, want %d", table, got, n)
	}
	if got := dbtest.Count(t, c.DB(b), "SELECT COUNT(*) FROM hb_set.expiry WHERE (packet_id >> 12) & 1023 = ?", int(bucket)); got != n {
		t.Errorf("the target holds %d expiry marks of bucket %d, want %d", got, bucket, n)
	}
	for i, e := range errs {
		if i == 3 {
			break
		}
		t.Errorf("a client saw: %s", e)
	}
	if len(acks) == 0 {
		t.Error("no open acknowledged during the move")
	}
	for _, k := range acks {
		if got := ctltest.SharesOn(t, c, b, k.ID)[k.User]; got != k.Amount {
			t.Errorf("user %s was answered %d fen of %s; the target holds %d", k.User, k.Amount, k.ID, got)
		}
	}
}

// fill inserts n funded packets of 10 shares into today's day table of
// bucket on SET set, with their expiry marks, by SQL (MariaDB's sequence
// engine): the shape of a busy bucket, in seconds. It returns the table.
func fill(t testing.TB, c *clustertest.Cluster, set string, bucket hongbao.Bucket, n int) string {
	t.Helper()
	db := c.DB(set)
	id, err := hongbao.NewMinter(time.Now).Next(bucket)
	if err != nil {
		t.Fatal(err)
	}
	dt := id.Table(dbtest.Shanghai(t))
	for _, stmt := range schema.Statements(dt) {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	ms := int64(id) >> 22
	if _, err := db.Exec(`INSERT INTO `+dt.Packets()+` (id, sender, type, total, count, greeting, remaining_amount, remaining_count,
		created_at, expires_at, closed, funding)
		SELECT ((? - FLOOR(seq / 4096)) << 22) | (? << 12) | (seq % 4096), 1000 + seq, 'random', 1000, 10, '', 1000, 10,
		UTC_TIMESTAMP(3), UTC_TIMESTAMP(3) + INTERVAL 1 DAY, 0, 1 FROM `+dt.DB()+`.seq_1_to_`+strconv.Itoa(n), ms-1, int(bucket)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO hb_set.expiry (packet_id, expires_at) SELECT id, expires_at FROM " + dt.Packets()); err != nil {
		t.Fatal(err)
	}
	return dt.Packets()
}

// idsOf returns up to limit packet IDs of table on SET set.
func idsOf(t *testing.T, c *clustertest.Cluster, set, table string, limit int) []hongbao.PacketID {
	t.Helper()
	rows, err := c.DB(set).Query("SELECT id FROM "+table+" ORDER BY id DESC LIMIT ?", limit)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []hongbao.PacketID
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, hongbao.PacketID(id))
	}
	return ids
}
