package webhooks_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api/webhook"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/statement"
)

// TestClusterWebhooksUnderKills: a whole cluster (real binaries) with
// webhooks on sends and opens packets through the router, some sold out,
// the rest expiring with a refund, while the receiver is down for a while,
// the settler of SET a is killed -9 during delivery and a server of SET a
// is killed -9 during opens. In the end the receiver holds exactly the
// events the SETs' records call for (a send, each share, each sell-out,
// each expiry and refund: nothing missing, nothing extra), each with the
// payload of its record, duplicates only under the same ID and body; no
// event is left; the monthly statement of each sender agrees with the
// wallet; verify is clean.
func TestClusterWebhooksUnderKills(t *testing.T) {
	dbtest.Need(t) // a whole cluster: skipped only under -short
	began := time.Now()
	r := newReceiver(t)
	r.down.Store(true)
	r.delay.Store(int64(20 * time.Millisecond))
	c := clustertest.Start(t, clustertest.Options{Expiry: 8 * time.Second,
		ConfigYAML: fmt.Sprintf("webhooks:\n  urls: [%q]\n  secret: %q\n", r.srv.URL, secret)})
	client := c.Client.Retrying(15 * time.Second)
	var (
		mu      sync.Mutex
		packets []hongbao.PacketID
		senders = map[hongbao.UserID]bool{}
	)
	wave := func(n int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				sender := dbtest.FreshUser()
				c.TopUp(t, sender, 1000)
				resp := client.Send(sender, hongbao.SendRequest{Total: 600, Count: 4, Type: hongbao.Random}, fmt.Sprintf("k%d-%d", sender, i))
				if resp.Status != http.StatusCreated {
					t.Errorf("send: %v", resp)
					return
				}
				id, err := hongbao.ParsePacketID(resp.Body.ID)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				packets, senders[sender] = append(packets, id), true
				mu.Unlock()
				for range 2 + i%4 { // 2..5 openers of 4 shares: some sell out
					client.Open(dbtest.FreshUser(), resp.Body.ID) // an answer lost to a kill is fine: the records decide
				}
			})
		}
		wg.Wait()
	}
	wave(16) // the receiver is down: events wait
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := func(e webhook.Event) {
		var d struct{ Packet string }
		_ = json.Unmarshal(e.Data, &d)
		id, err := hongbao.ParsePacketID(d.Packet)
		if err != nil {
			return
		}
		if set, err := c.SetOf(id); err == nil && set == "a" {
			once.Do(func() { close(held); <-release })
		}
	}
	r.before.Store(&hold)
	r.down.Store(false)
	var kills sync.WaitGroup
	kills.Go(func() {
		select { // SET a's settler waits for an answer: kill it now
		case <-held:
		case <-time.After(30 * time.Second):
			t.Error("no delivery of SET a's events to hold")
		}
		c.Kill(clustertest.Settler, "a")
		close(release) // the receiver takes the event its sender never hears of
		time.Sleep(300 * time.Millisecond)
		c.Restart(clustertest.Settler, "a")
		c.Kill(clustertest.Server, "a1")
		time.Sleep(300 * time.Millisecond)
		c.Restart(clustertest.Server, "a1")
	})
	wave(16)
	kills.Wait()

	want := expectedEvents(t, c, packets) // once every packet expired and its refund is delivered
	// The killed settler's claimed events wait for their lease (a minute).
	waitUpTo(t, 2*time.Minute, "every event delivered", func() bool { return len(r.ids()) >= len(want) && eventsLeft(t, c) == 0 })
	got := r.ids()
	if missing, extra := diff(want, got); len(missing)+len(extra) > 0 {
		t.Fatalf("%d events expected, %d received; missing %v; extra %v", len(want), len(got), missing, extra)
	}
	r.mu.Lock()
	for _, e := range r.got {
		w := want[e.ID]
		if strings.HasSuffix(w, `"duration_ms":`) { // how long it took: the server's clock
			if !strings.HasPrefix(string(e.Data), w) {
				t.Errorf("event %s: data %s, want %s...", e.ID, e.Data, w)
			}
		} else if string(e.Data) != w {
			t.Errorf("event %s: data %s, want %s", e.ID, e.Data, w)
		}
	}
	if len(r.bad) > 0 {
		t.Errorf("receiver: %v", r.bad)
	}
	if len(r.got) <= len(want) { // the held event at least came twice, under its one ID
		t.Errorf("%d deliveries of %d events: the settler killed during a delivery sent nothing again", len(r.got), len(want))
	}
	t.Logf("%d events, %d deliveries", len(want), len(r.got))
	r.mu.Unlock()
	checkStatements(t, c, slices.Collect(maps.Keys(senders)), began)
	checkDaily(t, c, began)
	if out := c.MustCtl(t, "webhook", "list"); strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("hbctl webhook list after delivery:\n%s", out)
	}
	c.CheckInvariants(t)
}

// checkDaily runs hbctl statement for each day (Asia/Shanghai) the test
// ran on: one day, or two when it ran over midnight there (16:00 UTC).
// Together they hold the whole ledger (the cluster is the test's), the SETs
// agreeing to the fen, each written to its file; so does the archival
// cron's statement of each of those days.
func checkDaily(t *testing.T, c *clustertest.Cluster, began time.Time) {
	t.Helper()
	entries := dbtest.Count(t, c.WalletDB(), "SELECT COUNT(*) FROM ledger")
	var listed, cron int
	totals, sets := map[string]statement.Total{}, map[string]statement.Total{}
	for _, day := range testDays(t, began) {
		path := filepath.Join(t.TempDir(), "statement.json")
		c.MustCtl(t, "statement", "--day", day, "--format", "json", "--out", path)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var st statement.JSON
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Problems) > 0 {
			t.Errorf("statement of %s: problems %v", day, st.Problems)
		}
		listed += len(st.Entries)
		for k, v := range st.Totals {
			totals[k] = statement.Total{N: totals[k].N + v.N, Sum: totals[k].Sum + v.Sum}
		}
		for k, v := range st.SETs {
			sets[k] = statement.Total{N: sets[k].N + v.N, Sum: sets[k].Sum + v.Sum}
		}
		// The archival cron writes the previous day's: this one, as of the next.
		dir := t.TempDir()
		next, err := time.ParseInLocation(time.DateOnly, day, dbtest.Shanghai(t))
		if err != nil {
			t.Fatal(err)
		}
		c.MustCtl(t, "archive", "run", "--as-of", next.AddDate(0, 0, 1).Format(time.DateOnly), "--statement-dir", dir)
		raw, err = os.ReadFile(filepath.Join(dir, "statement-"+day+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		cron += strings.Count(string(raw), "\nentry,")
	}
	if listed != entries || cron != entries {
		t.Errorf("the statements list %d entries, the cron's %d, the ledger has %d", listed, cron, entries)
	}
	for _, k := range []string{hongbao.KindSend, hongbao.KindOpen, hongbao.KindRefund} {
		if totals[k] != sets[k] || totals[k].N == 0 {
			t.Errorf("%s: ledger %+v, SETs %+v", k, totals[k], sets[k])
		}
	}
}

// testDays is each day in Asia/Shanghai from began's to now's.
func testDays(t *testing.T, began time.Time) []string {
	t.Helper()
	sh := dbtest.Shanghai(t)
	last := time.Now().In(sh).Format(time.DateOnly)
	var days []string
	for d := began.In(sh); ; d = d.AddDate(0, 0, 1) {
		days = append(days, d.Format(time.DateOnly))
		if days[len(days)-1] >= last {
			return days
		}
	}
}

// expectedEvents waits until every packet is settled (sold out, or closed
// and its refund delivered) and returns the events their records call for,
// by ID, with their data.
func expectedEvents(t *testing.T, c *clustertest.Cluster, ids []hongbao.PacketID) map[string]string {
	t.Helper()
	want := map[string]string{}
	for _, id := range ids {
		set, err := c.SetOf(id)
		if err != nil {
			t.Fatal(err)
		}
		db := c.DB(set)
		packets, _ := dbtest.Tables(t, id)
		var closed bool
		waitFor(t, "packet "+id.String()+" settled", func() bool {
			var left, outbox int
			err := db.QueryRow("SELECT closed, remaining_count, (SELECT COUNT(*) FROM hb_set.outbox WHERE packet_id = ?) FROM "+packets+" WHERE id = ?",
				id, id).Scan(&closed, &left, &outbox)
			return err == nil && (closed || left == 0) && outbox == 0
		})
		p := dbtest.ReadPacket(t, db, id)
		want["packet.sent:"+id.String()] = fmt.Sprintf(`{"packet":"%s","sender":"%s","total":600,"count":4,"type":"random","expires_at":"%s"}`,
			id, p.Sender, id.Time().Add(8*time.Second).UTC().Format("2006-01-02T15:04:05.000Z"))
		for _, s := range p.Details {
			want[fmt.Sprintf("packet.opened:%s:%s", id, s.User)] = fmt.Sprintf(`{"packet":"%s","user":"%s","amount":%d}`, id, s.User, s.Amount)
		}
		if p.RemainingCount == 0 {
			best := p.Details[0]
			for _, s := range p.Details {
				if s.Amount > best.Amount {
					best = s
				}
			}
			want["packet.finished:"+id.String()] = fmt.Sprintf(`{"packet":"%s","best":"%s","best_amount":%d,"duration_ms":`, id, best.User, best.Amount)
			continue
		}
		want["packet.expired:"+id.String()] = fmt.Sprintf(`{"packet":"%s","sender":"%s","refund":%d}`, id, p.Sender, p.RemainingAmount)
		want["packet.refunded:"+id.String()] = fmt.Sprintf(`{"packet":"%s","user":"%s","amount":%d}`, id, p.Sender, p.RemainingAmount)
	}
	return want
}

// eventsLeft counts the events every SET still holds.
func eventsLeft(t *testing.T, c *clustertest.Cluster) int {
	n := 0
	for _, s := range c.Sets {
		n += dbtest.Count(t, c.DB(s.Name), "SELECT COUNT(*) FROM hb_set.events")
	}
	return n
}

// diff returns the IDs of want not in got and of got not in want.
func diff(want map[string]string, got []string) (missing, extra []string) {
	for id := range want {
		if !slices.Contains(got, id) {
			missing = append(missing, id)
		}
	}
	for _, id := range got {
		if _, ok := want[id]; !ok {
			extra = append(extra, id)
		}
	}
	return missing, extra
}

// checkStatements reads each sender's statements through the router, of
// each month the test ran in (two when it ran over a month's end): the
// first opens at 0, the last closes at the wallet's balance; a bad month is
// a 400.
func checkStatements(t *testing.T, c *clustertest.Cluster, users []hongbao.UserID, began time.Time) {
	t.Helper()
	var months []string
	for _, d := range testDays(t, began) {
		if m := d[:len("2006-01")]; !slices.Contains(months, m) {
			months = append(months, m)
		}
	}
	for _, u := range users[:min(len(users), 5)] {
		var opening, closing int64
		entries := 0
		for i, month := range months {
			rep := c.Do(c.Request(http.MethodGet, c.URL()+"/v1/me/statement?month="+month, u, nil, nil))
			var st struct {
				Entries  []json.RawMessage `json:"entries"`
				Balances []struct {
					User    string `json:"user"`
					Opening int64  `json:"opening"`
					Closing int64  `json:"closing"`
				} `json:"balances"`
			}
			if rep.Status != http.StatusOK || json.Unmarshal(rep.Raw, &st) != nil || len(st.Balances) > 1 || st.Balances == nil && len(st.Entries) > 0 {
				t.Fatalf("statement of %s for %s: %v", u, month, rep)
			}
			entries += len(st.Entries)
			if len(st.Balances) == 1 {
				if st.Balances[0].User != u.String() {
					t.Errorf("statement of %s for %s names %s", u, month, st.Balances[0].User)
				}
				if i == 0 {
					opening = st.Balances[0].Opening
				}
				closing = st.Balances[0].Closing
			}
		}
		bal, err := c.Wallet().Balance(t.Context(), u)
		if err != nil || opening != 0 || closing != bal || entries < 2 {
			t.Errorf("statements of %s for %v: opening %d, closing %d, %d entries; wallet balance %d (%v)", u, months, opening, closing, entries, bal, err)
		}
	}
	for _, bad := range []string{"2026-13", "nov", "2026-11-01"} {
		rep := c.Do(c.Request(http.MethodGet, c.URL()+"/v1/me/statement?month="+bad, users[0], nil, nil))
		if rep.Status != http.StatusBadRequest || rep.JSON["code"] != "invalid_month" {
			t.Errorf("month %q: %v", bad, rep)
		}
	}
}
