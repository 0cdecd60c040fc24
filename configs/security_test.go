package configs

import (
	"strings"
	"testing"
	"time"
)

// TestRouterLimits: dev.yaml's abuse limits, their environment overrides
// (inline under router:, so HB_ROUTER_...), and what Check refuses.
func TestRouterLimits(t *testing.T) {
	c, err := Load("dev.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := RouterLimits{MaxPerAddress: 256, MaxStreams: 32, MaxUsers: 262144,
		Open: Rate{PerSecond: 10, Burst: 20}, Grab: Rate{PerSecond: 20, Burst: 40}, Send: Rate{PerSecond: 2, Burst: 10}}
	if c.Router.RouterLimits != want {
		t.Errorf("dev.yaml router limits = %+v, want %+v", c.Router.RouterLimits, want)
	}
	if d := Defaults().Router.RouterLimits; d != want {
		t.Errorf("default router limits = %+v, want dev.yaml's %+v", d, want)
	}
	c, err = Load("dev.yaml", []string{"HB_ROUTER_OPEN_PER_SECOND=0", "HB_ROUTER_SEND_BURST=3", "HB_ROUTER_MAX_PER_ADDRESS=0"})
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Router; r.Open.PerSecond != 0 || r.Send.Burst != 3 || r.MaxPerAddress != 0 || r.Listen != "127.0.0.1:8080" {
		t.Errorf("overridden router = %+v", r)
	}
	if e := (Rate{PerSecond: 4}).Every(); e != 250*time.Millisecond {
		t.Errorf("Every of 4/s = %v", e)
	}
	if e := (Rate{}).Every(); e != 0 {
		t.Errorf("Every of no limit = %v", e)
	}
	for _, bad := range []struct{ old, new, says string }{
		{"open: {per_second: 10, burst: 20}", "open: {per_second: 10, burst: 0}", "router.open"},
		{"grab: {per_second: 20, burst: 40}", "grab: {per_second: -1, burst: 40}", "router.grab"},
		{"max_per_address: 256", "max_per_address: -1", "max_per_address"},
		{"send: {per_second: 2, burst: 10}", "send: {per_second: 2, burst: 10, typo: 1}", "typo"},
	} {
		_, err := Load(writeConfig(t, replace(t, bad.old, bad.new)), nil)
		if err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%q: Load = %v, want an error naming %s", bad.new, err, bad.says)
		}
	}
}
