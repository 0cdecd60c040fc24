package dashboard

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// sample is what one scrape of a process's admin listener gave.
type sample struct {
	ok, ready                 bool
	why                       string
	at                        time.Time
	opens, busy               float64 // counters
	depth, live               float64
	outboxRows, outboxAge     float64
	hooksPending, hooksFailed float64 // settler: webhook events waiting, given up
	lastRound                 float64 // settler: unix time of its last good round
}

// scrape reads admin's /readyz and /metrics.
func scrape(ctx context.Context, c *http.Client, admin string, now time.Time) sample {
	s := sample{at: now}
	body, code, err := get(ctx, c, "http://"+admin+"/readyz")
	if err != nil {
		s.why = err.Error()
		return s
	}
	s.ready, s.why = code == http.StatusOK, strings.TrimSpace(body)
	body, _, err = get(ctx, c, "http://"+admin+"/metrics")
	if err != nil {
		s.why = err.Error()
		return s
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		s.why = fmt.Sprintf("metrics: %v", err)
		return s
	}
	s.ok = true
	for _, m := range fams["hongbao_opens_total"].GetMetric() {
		v := m.GetCounter().GetValue()
		s.opens += v
		if label(m, "outcome") == "busy" {
			s.busy += v
		}
	}
	s.depth = gauge(fams, "hongbao_queue_depth")
	s.live = gauge(fams, "hongbao_queue_live_packets")
	s.outboxRows = gauge(fams, "hongbao_outbox_rows")
	s.outboxAge = gauge(fams, "hongbao_outbox_oldest_age_seconds")
	s.lastRound = gauge(fams, "hongbao_settle_last_round_timestamp_seconds")
	s.hooksPending = gauge(fams, "hongbao_webhook_pending_events")
	s.hooksFailed = gauge(fams, "hongbao_webhook_failed_events")
	return s
}

func get(ctx context.Context, c *http.Client, url string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return string(b), resp.StatusCode, err
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// gauge sums a family's samples (0 when absent).
func gauge(fams map[string]*dto.MetricFamily, name string) float64 {
	var v float64
	for _, m := range fams[name].GetMetric() {
		v += m.GetGauge().GetValue() + m.GetUntyped().GetValue() + m.GetCounter().GetValue()
	}
	return v
}

// process turns a target's scrape into its row, with rates against the
// previous scrape of the same target.
func (b *Board) process(tg Target, s sample, now time.Time) (Process, sample) {
	p := Process{Name: tg.Name, Addr: tg.Addr, Admin: tg.Admin}
	if tg.Kind == "server" && b.d.Healthy != nil {
		h := b.d.Healthy(tg.Addr)
		p.Healthy = &h
	}
	switch {
	case tg.Admin == "":
		p.Why = "no admin address configured (sets[].admin)"
		return p, s
	case !s.ok:
		p.Why = s.why
		r := false
		p.Ready = &r
		return p, s
	}
	r := s.ready
	p.Ready = &r
	if !s.ready {
		p.Why = s.why
	}
	p.QueueDepth, p.LiveQueues = s.depth, s.live
	if s.lastRound > 0 {
		p.LastRoundS = max(now.Sub(time.Unix(0, int64(s.lastRound*1e9))).Seconds(), 0)
	}
	if prev, ok := b.prev[tg.Name]; ok && prev.ok {
		if dt := s.at.Sub(prev.at).Seconds(); dt > 0 {
			p.OpensPerS = max(s.opens-prev.opens, 0) / dt
			p.BusyPerS = max(s.busy-prev.busy, 0) / dt
		}
	}
	b.prev[tg.Name] = s
	return p, s
}

// routerOpens is the rate of opens the router answered, and of busy ones,
// from its own request metrics.
func (b *Board) routerOpens(now time.Time) (opens, busy float64) {
	if b.d.Router == nil {
		return 0, 0
	}
	fams, err := b.d.Router.Gather()
	if err != nil {
		return 0, 0
	}
	s := sample{ok: true, at: now}
	for _, f := range fams {
		if f.GetName() != "hongbao_http_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if label(m, "route") != "POST /v1/packets/{id}/open" {
				continue
			}
			s.opens += m.GetCounter().GetValue()
			if label(m, "code") == "503" {
				s.busy += m.GetCounter().GetValue()
			}
		}
	}
	prev, ok := b.prev["router"]
	b.prev["router"] = s
	if !ok {
		return 0, 0
	}
	dt := now.Sub(prev.at).Seconds()
	if dt <= 0 {
		return 0, 0
	}
	return max(s.opens-prev.opens, 0) / dt, max(s.busy-prev.busy, 0) / dt
}

// moving returns the buckets that changed SET in the last minute, as seen
// between the maps this board was shown.
func (b *Board) moving(t *topology.Map, now time.Time) []int {
	if b.seen != nil && b.seen.Version != t.Version {
		for bk := range hongbao.Buckets {
			if b.seen.Owner(hongbao.Bucket(bk)).Name != t.Owner(hongbao.Bucket(bk)).Name {
				b.moved[bk] = now
			}
		}
	}
	b.seen = t
	out := []int{}
	for bk, at := range b.moved {
		if now.Sub(at) > time.Minute {
			delete(b.moved, bk)
			continue
		}
		out = append(out, bk)
	}
	return out
}

// readTextfile parses a Prometheus textfile.
func readTextfile(path string) (map[string]*dto.MetricFamily, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(f)
}

func readArchive(path string) ([]Archive, string) {
	if path == "" {
		return nil, "archive.textfile is not set: the archiver's runs are not recorded"
	}
	fams, err := readTextfile(path)
	if err != nil {
		return nil, "no archiver run recorded (" + err.Error() + ")"
	}
	by := map[string]*Archive{}
	var order []string
	get := func(set string) *Archive {
		if by[set] == nil {
			by[set] = &Archive{Set: set}
			order = append(order, set)
		}
		return by[set]
	}
	for _, m := range fams["hongbao_archive_days"].GetMetric() {
		a, v := get(label(m, "set")), m.GetGauge().GetValue()
		switch label(m, "state") {
		case "archived":
			a.Archived = v
		case "pending":
			a.Pending = v
		case "skipped":
			a.Skipped = v
		}
	}
	for _, m := range fams["hongbao_archive_day_tables"].GetMetric() {
		a := get(label(m, "set"))
		a.Days = append(a.Days, Day{Date: label(m, "date"), State: label(m, "state"), Tables: m.GetGauge().GetValue()})
	}
	for _, m := range fams["hongbao_archive_last_run_timestamp_seconds"].GetMetric() {
		get(label(m, "set")).LastRun = time.Unix(int64(m.GetGauge().GetValue()), 0)
	}
	for _, m := range fams["hongbao_archive_last_run_success"].GetMetric() {
		get(label(m, "set")).OK = m.GetGauge().GetValue() == 1
	}
	out := make([]Archive, 0, len(order))
	for _, s := range order {
		slices.SortFunc(by[s].Days, func(x, y Day) int {
			return cmp.Or(strings.Compare(x.Date, y.Date), strings.Compare(x.State, y.State))
		})
		out = append(out, *by[s])
	}
	return out, ""
}

func readVerify(path string) (*Verify, string) {
	if path == "" {
		return nil, "dashboard.verify_textfile is not set: run hbctl verify --textfile FILE and name FILE there"
	}
	fams, err := readTextfile(path)
	if err != nil {
		return nil, "no verify recorded (" + err.Error() + ")"
	}
	v := &Verify{OK: gauge(fams, "hongbao_verify_ok") == 1,
		LastRun: time.Unix(int64(gauge(fams, "hongbao_verify_last_run_timestamp_seconds")), 0)}
	if s := gauge(fams, "hongbao_verify_last_success_timestamp_seconds"); s > 0 {
		v.LastSuccess = time.Unix(int64(s), 0)
	}
	return v, ""
}
