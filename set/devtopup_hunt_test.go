package set_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestDevTopUpBadKey: a dev top-up's Idempotency-Key the ledger's entry
// key cannot hold (too long, not printable ASCII) is refused 400
// invalid_idempotency_key, crediting nothing; a good one credits the
// grant once.
func TestDevTopUpBadKey(t *testing.T) {
	t.Parallel()
	const grant = 1000
	w := dailyWallet(t, hongbao.DailyLimits{})
	h := newHarness(t, harnessOpts{Wallet: w, DevGrant: grant})
	u := dbtest.FreshUser()
	cases := []struct {
		name   string
		key    string
		status int
		code   string
	}{
		{"no key", "", 400, "invalid_idempotency_key"},
		{"201 bytes", strings.Repeat("k", 201), 400, "invalid_idempotency_key"},
		{"65 bytes", strings.Repeat("k", 65), 400, "invalid_idempotency_key"},
		{"84 bytes", strings.Repeat("k", 84), 400, "invalid_idempotency_key"},
		{"invalid UTF-8", "a\xffb", 400, "invalid_idempotency_key"},
		{"emoji", "\U0001F600", 400, "invalid_idempotency_key"},
		{"Chinese", "红包", 400, "invalid_idempotency_key"},
		{"tab", "a\tb", 400, "invalid_idempotency_key"},
		{"64 bytes", strings.Repeat("k", 64), 200, ""},
		{"the page's", "page-0123456789abcdef01234567", 200, ""},
		{"printable ASCII", "a b~!", 200, ""},
	}
	for _, c := range cases {
		rq := request{method: http.MethodPost, path: "/v1/dev/topup", user: u}
		if c.key != "" {
			rq.header = map[string]string{"Idempotency-Key": c.key}
		}
		r := h.do(rq)
		if c.code != "" && !r.IsProblem(c.status, c.code) || c.code == "" && r.Status != c.status {
			t.Errorf("%s: %v; want %d %s", c.name, r, c.status, c.code)
		}
	}
	if b, err := w.Balance(context.Background(), u); err != nil || b != 3*grant {
		t.Errorf("balance %d, %v; want the three good top-ups' %d", b, err, 3*grant)
	}
}
