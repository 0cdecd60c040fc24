package router

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
)

// TestBatchOversizedRequestGoesAlone: a client request whose target or
// forwarded header is larger than a batch's sub-request may carry (a long
// query, a long Idempotency-Key) is sent alone, so it gets the answer it
// would get uncoalesced, and it never makes the server refuse the batch it
// would have joined: the other users' opens sent at the same time are all
// answered, none with malformed_batch.
func TestBatchOversizedRequestGoesAlone(t *testing.T) {
	long := strings.Repeat("a", 3000)
	cases := []struct {
		name   string
		method string
		target string
		header map[string]string
	}{
		{"long query on a detail", http.MethodGet, "?pad=" + long, nil},
		{"long query on an open", http.MethodPost, "/open?pad=" + long, nil},
		{"long Idempotency-Key", http.MethodPost, "/open", map[string]string{"Idempotency-Key": long}},
		{"long Content-Type", http.MethodPost, "/open", map[string]string{"Content-Type": "application/json; x=" + long}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a1 := newBatchFake(t, "a1", opened("a1"))
			b1 := newBatchFake(t, "b1", opened("b1"))
			rt, _ := batchRouter(t, []*batchFake{a1}, []*batchFake{b1})
			ids := idsRankedFirst(t, rt, a1.addr(), 1)
			id := ids[0]
			const n = 200
			out := make([]string, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					target := "/v1/packets/" + id.String() + "/open"
					method := http.MethodPost
					if i%2 == 1 { // the oversized one
						target, method = "/v1/packets/"+id.String()+c.target, c.method
					}
					r := httptest.NewRequest(method, target, nil)
					if i%2 == 1 {
						for k, v := range c.header {
							r.Header.Set(k, v)
						}
					}
					resp, err := rt.forward(r, hongbao.UserID(i+1), id, nil, nil)
					if err != nil {
						out[i] = "error: " + err.Error()
						return
					}
					out[i] = fmt.Sprintf("%d %s %s", resp.status, resp.code, resp.body)
				})
			}
			wg.Wait()
			for i, a := range out {
				if !strings.HasPrefix(a, "200  ") || !strings.Contains(a, `"server":"a1"`) {
					t.Errorf("request %d (oversized: %v): %.200s; want 200 from a1", i, i%2 == 1, a)
				}
			}
			if a1.singles.Load() != n/2 {
				t.Errorf("a1 got %d single requests, want the %d oversized ones", a1.singles.Load(), n/2)
			}
		})
	}
}
