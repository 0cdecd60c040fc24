package set_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// batchReply is a server's answer to a batch: the batch's own status and,
// when 200, the sub-responses.
type batchReply struct {
	Status  int
	Code    string // the batch's problem code, when refused
	Answers []api.BatchAnswer
}

// postBatch sends raw (a batch body) to the harness's batch endpoint,
// signed over sigBody as a router signs (nil: over raw), or unsigned.
func (h *harness) postBatch(t testing.TB, raw, sigBody []byte, signed bool, want int) batchReply {
	t.Helper()
	return h.postBatchTo(t, h.url, raw, sigBody, signed, want)
}

// postBatchTo is postBatch to the server at url.
func (h *harness) postBatchTo(t testing.TB, url string, raw, sigBody []byte, signed bool, want int) batchReply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+api.BatchPath, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if sigBody == nil {
		sigBody = raw
	}
	if signed {
		h.auth.SignBatch(req, sigBody)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := batchReply{Status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		var p api.Problem
		_ = json.Unmarshal(body, &p) // an empty code fails the caller's check
		out.Code = p.Code
		return out
	}
	if out.Answers, err = api.DecodeAnswers(body, want); err != nil {
		t.Fatalf("answers: %v", err)
	}
	return out
}

func openItem(user hongbao.UserID, id hongbao.PacketID) api.BatchItem {
	return api.BatchItem{Method: http.MethodPost, Target: "/v1/packets/" + id.String() + "/open", User: user,
		RequestID: "t-" + user.String()}
}

// TestBatchOpensOnePacket: a crowd's opens of one packet in one batch are
// each answered as if alone: exact amounts, each user once, the shares
// sum to the total, and the rows say what the answers said.
func TestBatchOpensOnePacket(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	const count, crowd = 40, 200 // more sub-requests than a server has runners: both paths run
	id := h.mustSend(t, distinctUsers(1)[0], 4000, count, "random")
	users := distinctUsers(crowd)
	var items []api.BatchItem
	for _, u := range users {
		items = append(items, openItem(u, id))
	}
	items = append(items, openItem(users[0], id)) // the same user twice in one batch
	got := h.postBatch(t, api.AppendBatch(nil, items), nil, true, len(items))
	if got.Status != http.StatusOK {
		t.Fatalf("batch: %+v", got)
	}
	told := map[hongbao.UserID]int64{}
	again := map[hongbao.UserID]int64{} // already_opened answers (users[0] is in the batch twice)
	soldOut := 0
	for i, a := range got.Answers {
		var o api.OpenJSON
		switch {
		case a.Status == http.StatusOK && json.Unmarshal(a.Body, &o) == nil && o.Status == "opened":
			if _, twice := told[items[i].User]; twice {
				t.Errorf("user %s opened twice", items[i].User)
			}
			told[items[i].User] = o.Amount
		case a.Status == http.StatusOK && o.Status == "already_opened" && items[i].User == users[0]:
			again[items[i].User] = o.Amount
		case a.Status == http.StatusConflict && strings.Contains(string(a.Body), `"sold_out"`):
			soldOut++
		case a.Status == http.StatusServiceUnavailable:
			if api.Get(a.Header, "Retry-After") == "" {
				t.Errorf("503 without Retry-After: %s", a.Body)
			}
			r, _ := h.openFinal(items[i].User, id.String()) // what a router's client would do
			if r.Status == http.StatusOK && r.Str("status") == "opened" {
				told[items[i].User] = int64(r.JSON["amount"].(float64))
			}
		default:
			t.Errorf("item %d (user %s): %d %s", i, items[i].User, a.Status, a.Body)
		}
	}
	for u, amount := range again {
		if told[u] != amount {
			t.Errorf("user %s: already_opened with %d, opened with %d", u, amount, told[u])
		}
	}
	p, _ := checkInvariants(t, h.db, id)
	if len(told) != count || p.RemainingCount != 0 {
		t.Errorf("%d opened answers, %d shares left; want %d and 0", len(told), p.RemainingCount, count)
	}
	var sum int64
	for _, a := range told {
		sum += a
	}
	if sum != 4000 {
		t.Errorf("answered shares sum to %d, want 4000", sum)
	}
	assertSameShares(t, id, told, p.Shares)
}

// TestBatchSubRequests: each sub-request gets its own answer, as alone:
// problems with their codes and headers, other endpoints, and nothing
// internal reachable from inside a batch.
func TestBatchSubRequests(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	sender := distinctUsers(1)[0]
	id := h.mustSend(t, sender, 100, 1, "fixed")
	send := api.BatchItem{Method: http.MethodPost, Target: "/v1/packets", User: sender, RequestID: "send-1",
		Header: []api.Header{{Name: "Content-Type", Value: "application/json"}},
		Body:   []byte(`{"total":300,"count":3,"type":"fixed","greeting":"batch"}`)}
	items := []api.BatchItem{
		openItem(distinctUsers(1)[0], id),
		{Method: http.MethodPost, Target: "/v1/packets/abc/open", User: 5},
		{Method: http.MethodGet, Target: "/v1/packets/" + id.String(), User: 5}, // concurrent with the open
		{Method: http.MethodPost, Target: "/v1/ping", User: 5},
		{Method: http.MethodPost, Target: api.BatchPath, User: 5},
		send,
		{Method: http.MethodPost, Target: "/v1/packets", User: sender, Body: []byte(`{}`)}, // no Content-Type
	}
	got := h.postBatch(t, api.AppendBatch(nil, items), nil, true, len(items))
	if got.Status != http.StatusOK {
		t.Fatalf("batch: %+v", got)
	}
	want := []struct {
		status int
		has    string
	}{
		{200, `"opened"`}, {400, `"invalid_id"`}, {200, `"total":100`}, {200, `"ok":true`},
		{404, `"not_found"`}, {201, `"total":300`}, {415, `"unsupported_media_type"`},
	}
	for i, w := range want {
		a := got.Answers[i]
		if a.Status != w.status || !strings.Contains(string(a.Body), w.has) {
			t.Errorf("item %d (%s %s): %d %s; want %d with %s", i, items[i].Method, items[i].Target, a.Status, a.Body, w.status, w.has)
		}
	}
	if ct := api.Get(got.Answers[1].Header, "Content-Type"); ct != "application/problem+json" {
		t.Errorf("problem answered as %q", ct)
	}
	if !strings.Contains(string(got.Answers[1].Body), `"request_id"`) {
		t.Errorf("a sub-request's problem without its request ID: %s", got.Answers[1].Body)
	}
}

// TestBatchRefused: a batch the server cannot trust or read is refused as
// a whole with a 4xx problem, and none of its sub-requests runs.
func TestBatchRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	sender := distinctUsers(1)[0]
	id := h.mustSend(t, sender, 100, 1, "fixed")
	thief := distinctUsers(1)[0]
	good := api.AppendBatch(nil, []api.BatchItem{openItem(thief, id)})
	tampered := api.AppendBatch(nil, []api.BatchItem{openItem(thief+1, id)}) // same length, another user
	many := make([]api.BatchItem, api.MaxBatchItems+1)
	for i := range many {
		many[i] = openItem(thief, id)
	}
	huge := api.AppendBatch(nil, []api.BatchItem{{Method: "POST", Target: "/v1/ping", User: 1, Body: make([]byte, api.MaxBatchBytes)}})
	tests := []struct {
		name     string
		raw, sig []byte
		signed   bool
		status   int
		code     string
	}{
		{"unsigned", good, nil, false, 403, "forbidden"},
		{"body tampered after signing", tampered, good, true, 403, "forbidden"},
		{"malformed", []byte("HBQ1\x01\x04POST"), nil, true, 400, "malformed_batch"},
		{"not a batch", []byte(`{"items":[]}`), nil, true, 400, "malformed_batch"},
		{"too many sub-requests", api.AppendBatch(nil, many), nil, true, 413, "batch_too_large"},
		{"too many bytes", huge, nil, true, 413, "body_too_large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := h.postBatch(t, tc.raw, tc.sig, tc.signed, 1)
			if got.Status != tc.status || got.Code != tc.code {
				t.Fatalf("answer %d %q, want %d %q", got.Status, got.Code, tc.status, tc.code)
			}
		})
	}
	if p, _ := checkInvariants(t, h.db, id); p.RemainingCount != 1 {
		t.Fatalf("a refused batch opened the packet: %d left", p.RemainingCount)
	}
	// The same signed batch twice: the second is a replay.
	req, _ := http.NewRequest(http.MethodPost, h.url+api.BatchPath, bytes.NewReader(good))
	h.auth.SignBatch(req, good)
	for i, want := range []int{200, 403} {
		again := req.Clone(req.Context())
		again.Body = io.NopCloser(bytes.NewReader(good))
		resp, err := h.client.Do(again)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("send %d of one signed batch: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
}

// TestBatchAnswersKnownAtOnce: after a packet sells out here, a batch
// mixing pings, repeated opens (already_opened with the user's amount),
// late opens (sold_out) and a bad ID is answered exactly, each answer at
// its own index: the answers known at once are served by the batch
// itself, not by runners, and say what the handler says alone.
func TestBatchAnswersKnownAtOnce(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	users := distinctUsers(6)
	id := h.mustSend(t, users[0], 300, 3, "fixed")
	var first []api.BatchItem
	for _, u := range users[:5] {
		first = append(first, openItem(u, id))
	}
	got := h.postBatch(t, api.AppendBatch(nil, first), nil, true, len(first))
	opened := map[hongbao.UserID]bool{}
	for i, a := range got.Answers {
		if a.Status == http.StatusOK && strings.Contains(string(a.Body), `"opened"`) {
			opened[first[i].User] = true
		}
	}
	if len(opened) != 3 {
		t.Fatalf("first batch: %d opened, want 3: %+v", len(opened), got.Answers)
	}
	ping := api.BatchItem{Method: http.MethodPost, Target: "/v1/ping", User: users[5], RequestID: "ping"}
	items := []api.BatchItem{ping}
	for _, u := range users {
		items = append(items, openItem(u, id), ping)
	}
	items = append(items, api.BatchItem{Method: http.MethodPost, Target: "/v1/packets/abc/open", User: 5})
	got = h.postBatch(t, api.AppendBatch(nil, items), nil, true, len(items))
	if got.Status != http.StatusOK {
		t.Fatalf("batch: %+v", got)
	}
	for i, a := range got.Answers {
		it, body := items[i], string(a.Body)
		switch {
		case it.Target == "/v1/ping":
			if a.Status != http.StatusOK || body != "{\"ok\":true}\n" {
				t.Errorf("item %d (ping): %d %q", i, a.Status, body)
			}
		case strings.Contains(it.Target, "/abc/"):
			if a.Status != http.StatusBadRequest || !strings.Contains(body, `"invalid_id"`) {
				t.Errorf("item %d (bad ID): %d %s", i, a.Status, body)
			}
		case opened[it.User]:
			if a.Status != http.StatusOK || body != "{\"status\":\"already_opened\",\"amount\":100}\n" {
				t.Errorf("item %d (user %s opened before): %d %q", i, it.User, a.Status, body)
			}
		default:
			if a.Status != http.StatusConflict || !strings.Contains(body, `"code":"sold_out"`) {
				t.Errorf("item %d (user %s, late): %d %s", i, it.User, a.Status, body)
			}
		}
	}
}
