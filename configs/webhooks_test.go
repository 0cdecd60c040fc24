package configs

import (
	"strings"
	"testing"
)

// TestWebhooks: the environment sets the URLs (comma-separated) and the
// secret; URLs need a secret and must be absolute http(s) URLs.
func TestWebhooks(t *testing.T) {
	c, err := Load("dev.yaml", []string{"HB_WEBHOOKS_URLS=http://a.example/hook,https://b.example/h", "HB_WEBHOOKS_SECRET=0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Webhooks.On() || len(c.Webhooks.URLs) != 2 || c.Webhooks.URLs[1] != "https://b.example/h" || c.Webhooks.Secret != "0123456789abcdef" {
		t.Fatalf("webhooks from the environment: %+v", c.Webhooks)
	}
	for _, tc := range []struct {
		w    Webhooks
		want string // "" valid
	}{
		{Webhooks{}, ""},
		{Webhooks{Secret: "short"}, ""}, // off: the secret is not used
		{Webhooks{URLs: []string{"http://x/h"}, Secret: "0123456789abcdef"}, ""},
		{Webhooks{URLs: []string{"http://x/h"}, Secret: "short"}, "secret"},
		{Webhooks{URLs: []string{"x/h"}, Secret: "0123456789abcdef"}, `url "x/h"`},
		{Webhooks{URLs: []string{"ftp://x/h"}, Secret: "0123456789abcdef"}, `url "ftp://x/h"`},
	} {
		errs := tc.w.check()
		if (len(errs) == 0) != (tc.want == "") || (len(errs) > 0 && !strings.Contains(errs[0].Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.w, errs, tc.want)
		}
	}
}
