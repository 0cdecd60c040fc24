package dashboard

import (
	"cmp"
	"context"
	"sync"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// Status is what GET /dashboard/status answers.
type Status struct {
	At          time.Time   `json:"at"`
	Version     int64       `json:"topology_version"`
	Buckets     []int       `json:"buckets"` // bucket -> index into Sets
	Moving      []int       `json:"moving"`  // buckets that changed SET in the last minute
	Moves       int64       `json:"moves"`   // buckets the router saw move since it started
	Sets        []SetStatus `json:"sets"`
	OpensPerS   float64     `json:"opens_per_s"` // every server's opens answered, per second
	BusyRate    float64     `json:"busy_rate"`   // the share of them answered busy
	Source      string      `json:"opens_source"`
	Archive     []Archive   `json:"archive"`
	ArchiveNote string      `json:"archive_note,omitempty"`
	Verify      *Verify     `json:"verify"`
	VerifyNote  string      `json:"verify_note,omitempty"`
	// Audit is the last money audit run in process (nil: none yet, or
	// none configured).
	Audit *Audit `json:"audit"`

	// Rebalance is the newest rebalance in the journal (nil: none, or the
	// journal unread); RebalanceNote says why there is none,
	// RebalanceError why the journal could not be read.
	Rebalance      *Rebalance `json:"rebalance"`
	RebalanceNote  string     `json:"rebalance_note,omitempty"`
	RebalanceError string     `json:"rebalance_error,omitempty"`
}

// SetStatus is one SET.
type SetStatus struct {
	Name       string    `json:"name"`
	State      string    `json:"state"`  // active, or draining: every bucket is to leave it
	Weight     int       `json:"weight"` // its share of the load in a rebalance plan
	Buckets    int       `json:"buckets"`
	Servers    []Process `json:"servers"`
	Settlers   []Process `json:"settlers"`
	OpensPerS  float64   `json:"opens_per_s"`
	BusyPerS   float64   `json:"busy_per_s"`
	QueueDepth float64   `json:"queue_depth"`
	OutboxRows float64   `json:"outbox_rows"`
	OutboxLagS float64   `json:"outbox_lag_s"`
	// Webhook events waiting for delivery and given up (its settlers').
	WebhooksPending float64 `json:"webhooks_pending"`
	WebhooksFailed  float64 `json:"webhooks_failed"`
}

// Process is one scraped (or probed) process.
type Process struct {
	Name       string  `json:"name"`
	Addr       string  `json:"addr,omitempty"`
	Admin      string  `json:"admin,omitempty"`
	Healthy    *bool   `json:"healthy,omitempty"` // the router's probes (servers)
	Ready      *bool   `json:"ready"`             // its admin /readyz; nil when not scraped
	Why        string  `json:"why,omitempty"`     // why not ready, or why not scraped
	OpensPerS  float64 `json:"opens_per_s"`
	BusyPerS   float64 `json:"busy_per_s"`
	QueueDepth float64 `json:"queue_depth"`
	LiveQueues float64 `json:"live_queues"`
	LastRoundS float64 `json:"last_round_age_s,omitempty"` // settlers: since their last good round
}

// Archive is the archiver's last run of one SET (its textfile).
type Archive struct {
	Set      string    `json:"set"`
	LastRun  time.Time `json:"last_run"`
	OK       bool      `json:"ok"`
	Archived float64   `json:"archived_days"`
	Pending  float64   `json:"pending_days"`
	Skipped  float64   `json:"skipped_days"`
	Days     []Day     `json:"days"` // by date, then state
}

// Day is one date of a SET after the archiver's last run, in one state
// (live, pending, due, archived, skipped), with how many of its day tables
// are in it.
type Day struct {
	Date   string  `json:"date"`
	State  string  `json:"state"`
	Tables float64 `json:"tables"`
}

// Verify is the last hbctl verify's result (its textfile).
type Verify struct {
	OK          bool      `json:"ok"`
	LastRun     time.Time `json:"last_run"`
	LastSuccess time.Time `json:"last_success,omitempty"`
}

// collect reads everything once.
func (b *Board) collect(ctx context.Context) *Status {
	now := b.d.Now()
	t := b.d.Topology()
	st := &Status{At: now, Version: t.Version, Buckets: make([]int, hongbao.Buckets), Moves: b.d.Moves()}
	idx := map[string]int{}
	for i, s := range t.Sets {
		idx[s.Name] = i
		st.Sets = append(st.Sets, SetStatus{Name: s.Name, State: cmp.Or(s.State, topology.Active), Weight: s.Weight})
	}
	for bk := range hongbao.Buckets {
		i := idx[t.Owner(hongbao.Bucket(bk)).Name]
		st.Buckets[bk] = i
		st.Sets[i].Buckets++
	}
	st.Moving = b.moving(t, now)
	// The journal is read while the processes are scraped: the slower of
	// the two, not their sum, is what a poll waits for.
	journalRead := make(chan struct{})
	go func() {
		defer close(journalRead)
		st.Rebalance, st.RebalanceNote, st.RebalanceError = b.rebalance(ctx, now)
	}()
	samples := b.scrapeAll(ctx, now)
	<-journalRead
	var opens, busy float64
	scraped := false
	for _, tg := range b.d.Targets {
		i, ok := idx[tg.Set]
		if !ok {
			continue
		}
		p, sm := b.process(tg, samples[tg.Name], now)
		s := &st.Sets[i]
		if tg.Kind == "settler" {
			s.Settlers = append(s.Settlers, p)
			if sm.ok {
				s.WebhooksPending = max(s.WebhooksPending, sm.hooksPending)
				s.WebhooksFailed = max(s.WebhooksFailed, sm.hooksFailed)
			}
			continue
		}
		s.Servers = append(s.Servers, p)
		if sm.ok {
			scraped = true
			s.OpensPerS += p.OpensPerS
			s.BusyPerS += p.BusyPerS
			s.QueueDepth += p.QueueDepth
			s.OutboxRows = max(s.OutboxRows, sm.outboxRows)
			s.OutboxLagS = max(s.OutboxLagS, sm.outboxAge)
			opens += p.OpensPerS
			busy += p.BusyPerS
		}
	}
	st.Source = "servers' hongbao_opens_total"
	if !scraped {
		opens, busy = b.routerOpens(now)
		st.Source = "the router's hongbao_http_requests_total (no server admin listener configured or answering)"
	}
	st.OpensPerS = opens
	if opens > 0 {
		st.BusyRate = busy / opens
	}
	st.Archive, st.ArchiveNote = readArchive(b.d.Archive)
	st.Verify, st.VerifyNote = readVerify(b.d.Verify)
	return st
}

// scrapeAll scrapes every target at once.
func (b *Board) scrapeAll(ctx context.Context, now time.Time) map[string]sample {
	out := make(map[string]sample, len(b.d.Targets))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, tg := range b.d.Targets {
		if tg.Admin == "" {
			continue
		}
		wg.Go(func() {
			s := scrape(ctx, b.d.Client, tg.Admin, now)
			mu.Lock()
			out[tg.Name] = s
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
