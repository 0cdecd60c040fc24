package set_test

// Tests of requests the server refuses: malformed or out-of-limit sends,
// malformed and unknown packet IDs, and requests no router signed. Each is
// answered with problem JSON naming the problem, and writes nothing.

import (
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestBadInput: every malformed or unauthorised request is answered with
// problem JSON naming the problem, and writes nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	began := time.Now()
	huge := `{"total":1000,"count":10,"greeting":"` + strings.Repeat("x", 4<<20) + `"}`
	type sendCase struct {
		name   string
		body   string
		key    string
		status int
		code   string
	}
	cases := []sendCase{
		{"negative total", `{"total":-100,"count":1}`, "", 400, "invalid_total"},
		{"zero total", `{"total":0,"count":1}`, "", 400, "invalid_total"},
		{"fractional total", `{"total":100.5,"count":1}`, "", 400, "invalid_total"},
		{"integral float total", `{"total":100.0,"count":1}`, "", 400, "invalid_total"},
		{"exponent total", `{"total":1e3,"count":1}`, "", 400, "invalid_total"},
		{"string total", `{"total":"1000","count":1}`, "", 400, "invalid_total"},
		{"null total", `{"total":null,"count":1}`, "", 400, "null_value"},
		{"overflowing total", `{"total":99999999999999999999,"count":1}`, "", 400, "invalid_total"},
		{"missing total", `{"count":1}`, "", 400, "invalid_total"},
		{"zero count", `{"total":1000,"count":0}`, "", 400, "invalid_count"},
		{"negative count", `{"total":1000,"count":-1}`, "", 400, "invalid_count"},
		{"fractional count", `{"total":1000,"count":2.5}`, "", 400, "invalid_count"},
		{"total below count", `{"total":5,"count":10}`, "", 400, "total_below_count"},
		{"total over limit", `{"total":20001,"count":10}`, "", 400, "total_over_limit"},
		{"count over limit", `{"total":20000,"count":101}`, "", 400, "count_over_limit"},
		{"huge count", `{"total":20000,"count":9999999999999}`, "", 400, "count_over_limit"},
		{"unknown type", `{"total":1000,"count":10,"type":"lucky"}`, "", 400, "invalid_type"},
		{"numeric type", `{"total":1000,"count":10,"type":1}`, "", 400, "invalid_type"},
		{"fixed not divisible", `{"total":1000,"count":3,"type":"fixed"}`, "", 400, "fixed_not_divisible"},
		{"greeting too long", `{"total":1000,"count":10,"greeting":"` + strings.Repeat("x", 201) + `"}`, "", 400, "greeting_too_long"},
		{"unknown field", `{"total":1000,"count":10,"sender":"1"}`, "", 400, "unknown_field"},
		{"malformed JSON", `{"total":1000,`, "", 400, "malformed_json"},
		{"array", `[1000,10]`, "", 400, "malformed_json"},
		{"null", `null`, "", 400, "malformed_json"},
		{"empty", ``, "", 400, "malformed_json"},
		{"trailing garbage", `{"total":1000,"count":10} x`, "", 400, "trailing_data"},
		{"4 MiB body", huge, "", 413, "body_too_large"},
		{"long idempotency key", `{"total":1000,"count":10}`, strings.Repeat("k", 201), 400, "invalid_idempotency_key"},
	}
	var senders []hongbao.UserID
	for _, c := range cases {
		sender := dbtest.FreshUser()
		senders = append(senders, sender)
		r := h.send(sender, c.body, c.key)
		if !r.IsProblem(c.status, c.code) {
			t.Errorf("%s: %v, want %d %s problem", c.name, r, c.status, c.code)
		}
	}

	// Requests no router signed.
	good := []byte(`{"total":1000,"count":10}`)
	other := newSigner([]byte("some-other-secret-0123456789"), time.Now)
	stale := newSigner(testSecret, func() time.Time { return time.Now().Add(-2 * time.Minute) })
	future := newSigner(testSecret, func() time.Time { return time.Now().Add(2 * time.Minute) })
	forbidden := func(name string, rq request) {
		t.Helper()
		if r := h.do(rq); !r.IsProblem(http.StatusForbidden, "forbidden") {
			t.Errorf("%s: %v, want 403 forbidden", name, r)
		}
	}
	for _, f := range []struct {
		name string
		rq   func(u hongbao.UserID) request
	}{
		{"unsigned", func(u hongbao.UserID) request { return request{user: u, unsigned: true} }},
		{"forged", func(u hongbao.UserID) request { return request{user: u, signer: other} }},
		{"stale", func(u hongbao.UserID) request { return request{user: u, signer: stale} }},
		{"future", func(u hongbao.UserID) request { return request{user: u, signer: future} }},
	} {
		sender := dbtest.FreshUser()
		senders = append(senders, sender)
		rq := f.rq(sender)
		rq.method, rq.path, rq.body = http.MethodPost, "/v1/packets", good
		forbidden("send "+f.name, rq)
	}
	// A signature for one user does not carry over to another.
	{
		signedFor, claimed := dbtest.FreshUser(), dbtest.FreshUser()
		senders = append(senders, signedFor, claimed)
		req, _ := http.NewRequest(http.MethodPost, h.url+"/v1/packets", strings.NewReader(string(good)))
		newSigner(testSecret, time.Now).Sign(req, signedFor)
		req.Header.Set(api.HeaderUser, claimed.String())
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("signature of one user, header of another: %d", resp.StatusCode)
		}
	}

	// Malformed and unknown packet IDs, on every packet endpoint.
	opener := dbtest.FreshUser()
	offBucket := int64(time.Since(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)).Milliseconds())<<22 | 1000<<12
	unknownOld, _ := hongbao.NewPacketID(time.Date(2024, 6, 15, 12, 0, 0, 0, time.UTC), 123, 7)
	unknownNow, _ := hongbao.NewPacketID(time.Now(), hongbao.Bucket(mrand.IntN(1000)), 4095)
	for _, c := range []struct {
		id     string
		status int
		code   string
	}{
		{"abc", 400, "invalid_id"},
		{"-1", 400, "invalid_id"},
		{"1.5", 400, "invalid_id"},
		{"0", 400, "invalid_id"},
		{"0123", 400, "invalid_id"},
		{"+123", 400, "invalid_id"},
		{"99999999999999999999", 400, "invalid_id"},
		{fmt.Sprint(offBucket), 400, "invalid_id"},
		{unknownOld.String(), 404, "not_found"},
		{unknownNow.String(), 404, "not_found"},
	} {
		for _, do := range []struct {
			name string
			f    func(hongbao.UserID, string) reply
		}{{"open", h.open}, {"grab", h.grab}, {"detail", h.detail}} {
			if r := do.f(opener, c.id); !r.IsProblem(c.status, c.code) {
				t.Errorf("%s %q: %v, want %d %s", do.name, c.id, r, c.status, c.code)
			}
		}
	}

	// Unsigned opens of a real packet take no share.
	pid := h.mustSend(t, dbtest.FreshUser(), 1000, 10, "random")
	for _, f := range []struct {
		name string
		rq   request
	}{
		{"unsigned", request{unsigned: true}},
		{"forged", request{signer: other}},
		{"stale", request{signer: stale}},
	} {
		rq := f.rq
		rq.user, rq.method, rq.path = opener, http.MethodPost, "/v1/packets/"+pid.String()+"/open"
		forbidden("open "+f.name, rq)
	}
	if p, shares := checkInvariants(t, h.db, pid); len(shares) != 0 || p.RemainingCount != 10 {
		t.Errorf("refused opens took shares: %+v", shares)
	}

	packets, idem := rowsBySenders(t, h.db, senders, began, time.Now())
	if packets != 0 || idem != 0 {
		t.Errorf("refused sends wrote %d packet rows and %d idempotency rows", packets, idem)
	}
}

func newSigner(secret []byte, now func() time.Time) *api.Internal {
	return api.NewInternal(secret, now)
}
