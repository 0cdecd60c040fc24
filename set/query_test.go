package set_test

import (
	"net/http"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestQueryStrings: the endpoints that read a query refuse a malformed one
// or a parameter given twice (400 invalid_query) instead of answering as if
// it had not been sent; well-formed ones are answered.
func TestQueryStrings(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{Wallet: dailyWallet(t, hongbao.DailyLimits{})})
	u := dbtest.FreshUser()
	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{"/v1/me/received?limit=%zz", 400, "invalid_query"},
		{"/v1/me/received?limit=1;cursor=2", 400, "invalid_query"},
		{"/v1/me/sent?limit=1&limit=50", 400, "invalid_query"},
		{"/v1/me/statement?month=%zz", 400, "invalid_query"},
		{"/v1/me/statement?month=2026-11&month=2026-10", 400, "invalid_query"},
		{"/v1/me/received?limit=%35", 200, ""},
		{"/v1/me/sent?limit=5&cursor=7", 200, ""},
		{"/v1/me/statement?month=2026-11", 200, ""},
	} {
		r := h.do(request{method: http.MethodGet, path: c.path, user: u})
		if c.code != "" && !r.IsProblem(c.status, c.code) || c.code == "" && r.Status != c.status {
			t.Errorf("GET %s: %v; want %d %s", c.path, r, c.status, c.code)
		}
	}
}
