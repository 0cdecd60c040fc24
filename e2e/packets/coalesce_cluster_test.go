package packets_test

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/e2e/harness/packettest"
)

// serverRequests sums hongbao_http_requests_total of route over the
// admin listeners of every server of the cluster.
func serverRequests(c *packettest.Cluster, t *testing.T, route string) float64 {
	t.Helper()
	var sum float64
	for _, s := range c.Sets {
		for _, adm := range s.Admin {
			resp, err := http.Get("http://" + adm + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				if !strings.HasPrefix(line, "hongbao_http_requests_total{") || !strings.Contains(line, `route="`+route+`"`) {
					continue
				}
				v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				sum += v
			}
			resp.Body.Close()
		}
	}
	return sum
}

// TestClusterCoalescedHotPacket: a crowd opens one hot packet through the
// router at once; the router coalesces the opens into batches (fewer batch
// exchanges than opens reach the servers, each open still counted on its
// own), and every answer is exact: as many opened as shares, nobody twice,
// the shares sum to the total, each told amount is the row's.
func TestClusterCoalescedHotPacket(t *testing.T) {
	c := packettest.Start(t)
	topo := c.Topology(t)
	const shares, crowd, total = 100, 300, 10_000
	id := c.MustSend(t, c.RichUser(t), packettest.SendBody{Total: total, Count: shares, Type: "random", Greeting: "hot"}, "")
	if id == 0 {
		return
	}
	batchesBefore := serverRequests(c, t, "POST "+api.BatchPath)
	opensBefore := serverRequests(c, t, "POST /v1/packets/{id}/open")
	answers := make([]packettest.OpenAnswer, crowd)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range answers {
		u := dbtest.FreshUser()
		wg.Go(func() {
			<-start
			answers[i] = c.OpenFinal(u, id, packettest.RetryBusy, 30*time.Second)
		})
	}
	close(start)
	wg.Wait()
	p := c.CheckPacket(t, topo, id)
	if opened := packettest.CheckAnswers(t, p, answers); opened != shares {
		t.Errorf("%d opened answers, want %d", opened, shares)
	}
	var sum int64
	for _, a := range p.Shares {
		sum += a
	}
	if len(p.Shares) != shares || sum != total {
		t.Errorf("%d shares summing to %d, want %d summing to %d", len(p.Shares), sum, shares, total)
	}
	batches := serverRequests(c, t, "POST "+api.BatchPath) - batchesBefore
	opens := serverRequests(c, t, "POST /v1/packets/{id}/open") - opensBefore
	if opens < crowd || batches < 1 || batches >= opens {
		t.Errorf("servers counted %v opens in %v batches; want at least %d opens, each counted, in fewer batches", opens, batches, crowd)
	}
	t.Logf("%v opens reached the servers in %v batches", opens, batches)
}

// TestClusterCoalescedCancelledClients: clients that give up while their
// opens wait in a batch do not disturb the others of the batch: every
// client that waited gets its exact answer, and those that left got
// nothing they were not told (their shares, if taken, are theirs in MySQL
// and answered already_opened on a retry).
func TestClusterCoalescedCancelledClients(t *testing.T) {
	c := packettest.Start(t)
	topo := c.Topology(t)
	const shares, crowd = 100, 200
	id := c.MustSend(t, c.RichUser(t), packettest.SendBody{Total: 10_000, Count: shares, Type: "random", Greeting: "leave"}, "")
	if id == 0 {
		return
	}
	users := make([]hongbao.UserID, crowd)
	answers := make([]packettest.OpenAnswer, crowd)
	var wg sync.WaitGroup
	impatient := &http.Client{Timeout: time.Millisecond}
	for i := range users {
		users[i] = dbtest.FreshUser()
		wg.Go(func() {
			if i%4 == 0 { // a quarter leave almost at once
				_, _ = impatient.Do(c.Request(http.MethodPost, c.URL()+"/v1/packets/"+id.String()+"/open", users[i], nil, nil))
				return
			}
			answers[i] = c.OpenFinal(users[i], id, packettest.RetryBusy, 30*time.Second)
		})
	}
	wg.Wait()
	// Those who left ask again: a share they took is theirs, the same one.
	for i := 0; i < crowd; i += 4 {
		answers[i] = c.OpenFinal(users[i], id, packettest.RetryBusy, 30*time.Second)
	}
	p := c.CheckPacket(t, topo, id)
	packettest.CheckAnswers(t, p, answers)
	if len(p.Shares) != shares {
		t.Errorf("%d shares taken by %d openers, want all %d", len(p.Shares), crowd, shares)
	}
}
