// Package webhooks delivers a SET's webhook events (hb_set.events, written
// by the store in the transactions of the changes they report) to the
// configured endpoints: signed POSTs, at least once, retried with
// exponential backoff for a day, then kept as failed. The settler runs it.
//
// Ordering: a packet's events are delivered in the order they were
// written, one at a time, while their deliverer is alone (an event waits
// while an earlier one of its packet is pending). Events of different
// packets go out in parallel, in no promised order; a replayed failed
// event arrives after the later events of its packet.
package webhooks

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/api/webhook"
	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/store"
)

// Deliverer sends one SET's events to its endpoints.
type Deliverer struct {
	store  *store.Store
	client *http.Client
	urls   []string
	secret []byte
	now    func() time.Time
	log    *zap.Logger
	// Interval is the pause between rounds that found nothing due.
	Interval time.Duration
	// Lease is how long a claimed event is this deliverer's; one killed
	// while delivering leaves its events due again after it.
	Lease time.Duration
	// Timeout bounds one POST.
	Timeout time.Duration
	// Backoff is the first retry's delay, doubled on each failure up to
	// MaxBackoff; RetryFor is how long after its commit an event is
	// retried before it is kept as failed.
	Backoff, MaxBackoff, RetryFor time.Duration
	// Batch is how many events a round claims; Workers how many packets'
	// events it sends at once.
	Batch, Workers int
	// Metrics counts deliveries and failures; nil: none.
	Metrics *metrics.Webhooks
}

// New returns a Deliverer of st's events to urls, signed with secret.
func New(st *store.Store, client *http.Client, urls []string, secret []byte, now func() time.Time, log *zap.Logger) *Deliverer {
	return &Deliverer{store: st, client: client, urls: urls, secret: secret, now: now, log: log,
		Interval: 200 * time.Millisecond, Lease: time.Minute, Timeout: 10 * time.Second,
		Backoff: time.Second, MaxBackoff: time.Hour, RetryFor: 24 * time.Hour, Batch: 200, Workers: 8}
}

// Run delivers until ctx ends.
func (d *Deliverer) Run(ctx context.Context) {
	for {
		n, err := d.Round(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("webhook round failed; retrying", zap.Error(err))
		}
		wait := d.Interval
		if n > 0 && err == nil {
			wait = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Round claims the events due, sends each packet's in order (packets in
// parallel) and records the outcome; it returns how many it claimed.
func (d *Deliverer) Round(ctx context.Context) (int, error) {
	evs, err := d.store.ClaimEvents(ctx, d.now(), d.Lease, max(d.Batch, 1))
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	groups := byPacket(evs)
	work := make(chan []store.Event)
	var mu sync.Mutex
	var done, untried []int64
	var errs []error
	var wg sync.WaitGroup
	for range min(max(d.Workers, 1), len(groups)) {
		wg.Go(func() {
			for g := range work {
				ok, rest, err := d.sendGroup(ctx, g)
				mu.Lock()
				done, untried, errs = append(done, ok...), append(untried, rest...), append(errs, err)
				mu.Unlock()
			}
		})
	}
	for _, g := range groups {
		work <- g
	}
	close(work)
	wg.Wait()
	d.Metrics.Delivered(len(done))
	// Recorded even when shutting down: what was sent is not sent again.
	rec, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	errs = append(errs, d.store.EventsDelivered(rec, done), d.store.ReleaseEvents(rec, untried, d.now()))
	return len(evs), joinErrs(errs)
}

// byPacket splits evs by packet, each packet's in the order written.
func byPacket(evs []store.Event) [][]store.Event {
	var groups [][]store.Event
	at := map[int64]int{}
	for _, e := range evs {
		i, ok := at[int64(e.Packet)]
		if !ok {
			i = len(groups)
			at[int64(e.Packet)] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], e)
	}
	for _, g := range groups { // the store claims each packet's in order already; cheap to be sure
		slices.SortFunc(g, func(a, b store.Event) int { return cmp.Compare(a.Row, b.Row) })
	}
	return groups
}

// sendGroup sends one packet's events in order and stops at the first that
// fails: it returns those delivered and those it did not try (to release).
func (d *Deliverer) sendGroup(ctx context.Context, g []store.Event) (done, untried []int64, err error) {
	for i, e := range g {
		ok, err := d.send(ctx, e)
		if ok {
			done = append(done, e.Row)
			continue
		}
		for _, r := range g[i+1:] {
			untried = append(untried, r.Row)
		}
		return done, untried, err
	}
	return done, nil, nil
}

// send POSTs e to every endpoint that has not accepted it yet. When one
// fails it records the attempt (backoff, or failed past RetryFor) and
// returns false; the error is only the store's.
func (d *Deliverer) send(ctx context.Context, e store.Event) (bool, error) {
	body, err := Body(e)
	if err != nil {
		return false, err
	}
	var failures []string
	for _, u := range d.urls {
		if slices.Contains(strings.Split(e.DeliveredTo, ","), Endpoint(u)) {
			continue
		}
		if err := d.post(ctx, u, e.ID, body); err != nil {
			failures = append(failures, err.Error())
			continue
		}
		e.DeliveredTo = strings.TrimPrefix(e.DeliveredTo+","+Endpoint(u), ",")
	}
	if len(failures) == 0 {
		return true, nil
	}
	if ctx.Err() != nil { // shutting down: not the endpoint's failure; the lease ends
		return false, nil
	}
	now := d.now()
	e.Attempts++
	e.LastError = strings.Join(failures, "; ")
	e.NextAt = now.Add(d.backoff(e.Attempts))
	e.Failed = now.Sub(e.CreatedAt) >= d.RetryFor
	d.Metrics.AttemptFailed()
	if e.Failed {
		d.Metrics.GaveUp()
		d.log.Error("webhook event failed for good", zap.String("event", e.ID), zap.Stringer("packet_id", e.Packet),
			zap.Int("attempts", e.Attempts), zap.String("error", e.LastError))
	} else {
		d.log.Info("webhook delivery failed; retrying", zap.String("event", e.ID), zap.Stringer("packet_id", e.Packet),
			zap.Int("attempts", e.Attempts), zap.Time("next", e.NextAt), zap.String("error", e.LastError))
	}
	return false, d.store.EventRetry(ctx, e)
}

// backoff is the delay after the n-th failed attempt: Backoff doubled
// n-1 times, at most MaxBackoff.
func (d *Deliverer) backoff(n int) time.Duration {
	b := d.Backoff
	for i := 1; i < n && b < d.MaxBackoff; i++ {
		b *= 2
	}
	return min(b, d.MaxBackoff)
}

// post sends body to url, signed now; any 2xx answer accepts it.
func (d *Deliverer) post(ctx context.Context, url, id string, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hongbao-webhooks")
	req.Header.Set("Hongbao-Event-Id", id)
	req.Header.Set(webhook.Header, webhook.Sign(d.secret, d.now(), body))
	resp, err := d.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection; the answer's text means nothing
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: answered %d", url, resp.StatusCode)
	}
	return nil
}

// Body is the JSON an event is POSTed as.
func Body(e store.Event) ([]byte, error) {
	b, err := json.Marshal(webhook.Event{ID: e.ID, Type: e.Type, CreatedAt: e.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
		Data: json.RawMessage(e.Data)})
	if err != nil {
		return nil, fmt.Errorf("webhook event %s: %w", e.ID, err)
	}
	return b, nil
}

// Endpoint is how an event's row names an endpoint that accepted it: a
// short hash of its URL, so a changed URL list retries only new endpoints.
func Endpoint(url string) string {
	h := sha256.Sum256([]byte(url))
	return hex.EncodeToString(h[:6])
}

func joinErrs(errs []error) error {
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	return nil
}
