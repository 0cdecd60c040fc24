package store_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/store"
)

// TestKnownUnlisted: a packet known without its openers (a large one's
// knowledge) is opened without a read; a repeated opener in the work
// fails the attempt on the details' key and the works are applied again
// from a read, which answers it already_opened with its share; knowledge
// gone stale is refused by the packet's row the same way. MySQL ends with
// every share once, each with its credit, and the packet's rest.
func TestKnownUnlisted(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := setup(t, 1)
	reg := prometheus.NewRegistry()
	st := store.New(db, set, loc, time.Now, rand.Int64N).WithMetrics(metrics.NewStore(reg))
	id := createPacket(t, st, buckets[0], packetSpec{hongbao.Random, 5000, 50}, hongbao.Funded)
	retries := func() float64 { // the transactions run again for stale knowledge
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "hongbao_mysql_tx_retries_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetValue() == "stale" {
						return m.GetCounter().GetValue()
					}
				}
			}
		}
		return 0
	}
	open := func(k *hongbao.Snapshot, users ...hongbao.UserID) store.Batch {
		t.Helper()
		bs, err := st.OpenMany(ctx, []store.Work{{ID: id, Users: users, Known: k, OpenersUpTo: 10}})
		if err != nil {
			t.Fatalf("OpenMany %v: %v", users, err)
		}
		if bs[0].Openers != nil {
			t.Errorf("openers %v returned for a packet of 50 shares with OpenersUpTo 10", bs[0].Openers)
		}
		return bs[0]
	}
	unlisted := func(b store.Batch) *hongbao.Snapshot {
		return markKnown(&hongbao.Snapshot{Packet: *b.Packet, Unlisted: true})
	}
	a, b, c, d, e := dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
	b0 := open(nil, a)
	shareA := b0.Outcomes[0].Result.Amount

	b1 := open(unlisted(b0), b, c)
	for i, o := range b1.Outcomes {
		if o.Err != nil || o.Result.Status != hongbao.Opened {
			t.Errorf("fresh user %d on an unlisted packet: %+v", i, o)
		}
	}
	if b1.Packet.Greeting != knownMarker || retries() != 0 {
		t.Errorf("fresh users: read from MySQL (greeting %q) or retried (%v): the unlisted knowledge was not used", b1.Packet.Greeting, retries())
	}

	stale := unlisted(b0)
	b2 := open(unlisted(b1), a, d)
	if o := b2.Outcomes[0]; o.Err != nil || o.Result.Status != hongbao.AlreadyOpened || o.Result.Amount != shareA {
		t.Errorf("repeated opener: %+v, want already_opened %d", o, shareA)
	}
	if o := b2.Outcomes[1]; o.Err != nil || o.Result.Status != hongbao.Opened {
		t.Errorf("fresh user beside a repeated one: %+v", o)
	}
	if b2.Packet.Greeting == knownMarker || retries() != 1 {
		t.Errorf("repeated opener: greeting %q, %v retries; want one retry, read from MySQL", b2.Packet.Greeting, retries())
	}

	b3 := open(stale, e) // knows 49 left: MySQL has 46
	if o := b3.Outcomes[0]; o.Err != nil || o.Result.Status != hongbao.Opened || retries() != 2 {
		t.Errorf("stale knowledge: %+v after %v retries; want opened after a second retry", o, retries())
	}

	p := dbtest.CheckPacket(t, db, id)
	var sum int64
	for _, amount := range p.Shares {
		sum += amount
	}
	if len(p.Shares) != 5 || p.RemainingCount != 45 || p.RemainingAmount != 5000-sum || p.Shares[a] != shareA {
		t.Errorf("MySQL: %d shares %v, left %d/%d; want 5 shares, 45 left, %d fen, a's %d", len(p.Shares), p.Shares,
			p.RemainingAmount, p.RemainingCount, 5000-sum, shareA)
	}
	checkCredits(t, db, p)
}
