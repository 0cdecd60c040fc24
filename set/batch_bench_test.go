package set_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// BenchmarkServerPing is the server's cost of a ping (the no-op behind
// the router), over real HTTP from this process: alone, one signed
// exchange each, against 64 sub-requests in one batch. ns/op and
// allocations are per ping, client side included.
func BenchmarkServerPing(b *testing.B) {
	h := newHarness(b, harnessOpts{})
	b.Run("single", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if r := h.do(request{method: http.MethodPost, path: "/v1/ping", user: 42}); r.Status != http.StatusOK {
				b.Fatal(r)
			}
		}
	})
	b.Run("batch64", func(b *testing.B) {
		items := make([]api.BatchItem, 64)
		for i := range items {
			items[i] = api.BatchItem{Method: http.MethodPost, Target: "/v1/ping", User: hongbao.UserID(42 + i), RequestID: "0123456789abcdef"}
		}
		raw := api.AppendBatch(nil, items)
		b.ReportAllocs()
		for i := 0; i < b.N; i += len(items) {
			req, err := http.NewRequest(http.MethodPost, h.url+api.BatchPath, bytes.NewReader(raw))
			if err != nil {
				b.Fatal(err)
			}
			h.auth.SignBatch(req, raw)
			resp, err := h.client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("%d %v", resp.StatusCode, err)
			}
			if _, err := api.DecodeAnswers(body, len(items)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
