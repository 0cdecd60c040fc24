package ctltest

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// Opened is an open the router acknowledged.
type Opened struct {
	ID     hongbao.PacketID
	User   hongbao.UserID
	Amount int64
}

// Ack is an open the router acknowledged, and when.
type Ack struct {
	Opened
	At time.Time
}

// TimedLoad sends packets of 5 shares and opens them through the router,
// retrying 503s and lost answers for up to a minute as an app does,
// keeping every acknowledged open with its time and every final error.
// A minute: on a loaded machine a failover's pause (14 s) plus a router's
// attempts at the paused servers outlasted 20 s of retries.
type TimedLoad struct {
	mu     sync.Mutex
	Acks   []Ack
	Sent   []hongbao.PacketID
	Sends  []SendAck // Sent's senders, in the same order
	errors []string
}

// SendAck is a send the router acknowledged: by whom, and when.
type SendAck struct {
	From hongbao.UserID
	At   time.Time
}

// Run starts workers clients sending and opening until stop is closed;
// the caller waits for the returned group.
func (l *TimedLoad) Run(c *clustertest.Cluster, workers int, stop <-chan struct{}) *sync.WaitGroup {
	cl := c.Client.Retrying(time.Minute)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				from := User()
				r := cl.Send(from, hongbao.SendRequest{Total: 500, Count: 5, Type: hongbao.Random}, fmt.Sprintf("fw%d-%d", w, i))
				id, err := hongbao.ParsePacketID(r.Body.ID)
				if r.Status != http.StatusCreated || err != nil {
					l.Fail("send: " + r.String())
					continue
				}
				l.mu.Lock()
				l.Sent = append(l.Sent, id)
				l.Sends = append(l.Sends, SendAck{from, r.Answered})
				l.mu.Unlock()
				for range 5 {
					u := User()
					o := cl.Open(u, id.String())
					// already_opened: a retry of this user's own open, whose
					// first answer was lost (a timeout under load), tells
					// the amount committed: acknowledged as well.
					if o.Status != http.StatusOK || (o.Body.Status != hongbao.Opened && o.Body.Status != hongbao.AlreadyOpened) {
						l.Fail(fmt.Sprintf("open %s: %v", id, o))
						continue
					}
					l.mu.Lock()
					l.Acks = append(l.Acks, Ack{Opened{id, u, o.Body.Amount}, o.Answered})
					l.mu.Unlock()
				}
			}
		})
	}
	return &wg
}

// Fail keeps a final error a client saw.
func (l *TimedLoad) Fail(s string) {
	l.mu.Lock()
	l.errors = append(l.errors, s)
	l.mu.Unlock()
}

// Check fails the test unless no client saw an error, every acknowledged
// open is in the MySQL of its SET with its amount, every packet keeps its
// invariants and hbctl verify holds; it returns the longest time SET set
// acknowledged no open after since.
func (l *TimedLoad) Check(t *testing.T, c *clustertest.Cluster, set string, since time.Time) time.Duration {
	t.Helper()
	for i, e := range l.errors {
		if i == 5 {
			t.Errorf("... %d client errors in all", len(l.errors))
			break
		}
		t.Errorf("a client saw: %s", e)
	}
	WaitOutbox(t, c)
	lost, onSet := 0, 0
	var times []time.Time
	for _, a := range l.Acks {
		owner := OwnerOf(t, c, a.ID.Bucket())
		if got := SharesOn(t, c, owner, a.ID)[a.User]; got != a.Amount {
			lost++
			if lost <= 5 {
				t.Errorf("user %s was answered %d fen of %s; SET %s holds %d", a.User, a.Amount, a.ID, owner, got)
			}
		}
		if owner == set {
			onSet++
			if a.At.After(since) {
				times = append(times, a.At)
			}
		}
	}
	for _, id := range l.Sent {
		dbtest.CheckPacket(t, c.DB(OwnerOf(t, c, id.Bucket())), id) // shares + remaining = total, no user twice
	}
	c.CheckInvariants(t)
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	gap := time.Duration(0)
	prev := since
	for _, at := range times {
		gap = max(gap, at.Sub(prev))
		prev = at
	}
	if onSet < 50 || len(times) < 10 {
		t.Errorf("only %d opens acknowledged on SET %s, %d after the fault", onSet, set, len(times))
	}
	t.Logf("%d acknowledged opens checked (%d on SET %s), %d lost; %d packets checked", len(l.Acks), onSet, set, lost, len(l.Sent))
	return gap
}

// Acked is how many opens the router acknowledged so far: a test waits
// for the load to get going before its fault.
func (l *TimedLoad) Acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.Acks)
}
