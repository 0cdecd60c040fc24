package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
)

// clockSkew is the kind of a host whose clock is off by minutes: one SET
// server or settler restarted with -clock-offset (hbdev restart-with; the
// Go daemons read the wall clock through the vDSO, which libfaketime
// cannot reach, and a time namespace does not offset CLOCK_REALTIME), held
// so while the load runs, then restarted on the host's clock. A skewed
// server's signatures from the router are refused (the router sends to
// the SET's other servers); a settler ahead voids sends still under way
// (409 send_cancelled), one behind closes packets late. The checks after
// the run judge the money.
const clockSkew = "clock skew of a host"

// skewClock restarts server or settler of set with its clock off by 2 to
// 10 minutes, either way, for d.hold(); then restarts it on the host's
// clock and waits until the SET acknowledges writes again and the
// process answers. It returns the target and the time from that restart.
func (d *dev) skewClock(ctx context.Context, set configs.Set) (string, time.Duration, error) {
	kind, name, ready := "server", "", ""
	if len(set.SettlerAdmin) > 0 && d.rng.IntN(2) == 0 {
		kind, name, ready = "settler", set.Name, "http://"+set.SettlerAdmin[0]+"/readyz"
	} else {
		key, url := d.serverOf(set)
		name, ready = key[len("server-"):], url
	}
	offset := time.Duration(2+d.rng.IntN(9)) * time.Minute
	if d.rng.IntN(2) == 0 {
		offset = -offset
	}
	target := fmt.Sprintf("%s %s at %+v", kind, name, offset)
	serves, err := d.writes(ctx, set, ready)
	if err != nil {
		return target, 0, err
	}
	if err := d.restartWith(ctx, kind, name, "-clock-offset", offset.String()); err != nil {
		return target, 0, err
	}
	time.Sleep(d.hold())
	if err := d.restartWith(ctx, kind, name); err != nil {
		return target, 0, err
	}
	healed := time.Now()
	rec, err := until(ctx, healed, func() error { return serves(healed) })
	return target, rec, err
}

// restartWith restarts the dev cluster's process kind-name with args
// after its command line (none: as make up started it), through its
// supervisor (hbdev restart-with).
func (d *dev) restartWith(ctx context.Context, kind, name string, args ...string) error {
	argv := append([]string{"restart-with", "-run", d.run, kind, name}, args...)
	if out, err := exec.CommandContext(ctx, filepath.Join(d.bin, "hbdev"), argv...).CombinedOutput(); err != nil {
		return fmt.Errorf("hbdev %v: %w\n%s", argv, err, out)
	}
	return nil
}
