package set_test

import (
	"net/http"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestStatementMonthOutOfRange: a month of the form YYYY-MM whose bounds
// no wallet time can hold (year 0000, or 0001-01, which starts in year 0
// in UTC east of Greenwich) is the client's bad input: 400
// invalid_month, not a 500 from the database driver.
func TestStatementMonthOutOfRange(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{Wallet: dailyWallet(t, hongbao.DailyLimits{})})
	u := dbtest.FreshUser()
	cases := []struct {
		month  string
		status int
		code   string
	}{
		{"0000-01", 400, "invalid_month"},
		{"0000-12", 400, "invalid_month"},
		{"0001-01", 400, "invalid_month"}, // Shanghai's 0001-01-01 is in year 0 in UTC
		{"2026-13", 400, "invalid_month"},
		{"0001-02", 200, ""},
		{"2026-11", 200, ""},
		{"9999-12", 200, ""}, // ends 9999-12-31T16:00Z
	}
	for _, c := range cases {
		r := h.do(request{method: http.MethodGet, path: "/v1/me/statement?month=" + c.month, user: u})
		if c.code != "" && !r.IsProblem(c.status, c.code) || c.code == "" && r.Status != c.status {
			t.Errorf("month %s: %v; want %d %s", c.month, r, c.status, c.code)
		}
	}
}
