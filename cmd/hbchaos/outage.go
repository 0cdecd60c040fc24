package main

import (
	"context"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
)

// outageTick is how often a fault's write outage is sampled: the longest
// outage is exact to about this.
const outageTick = 50 * time.Millisecond

// watchOutage follows, while a fault of kind on set runs, the writes
// acknowledged to the SET's buckets (every bucket for the router's kill
// and the mover's, which hit no SET of their own), and returns what
// stops it: the longest stretch in which none was acknowledged, from the
// last write before the fault until the stop. It tells a SET that stopped
// taking writes from a component that took long to serve again while the
// writes went on (an old primary's rebuild, an archiver's whole run). -1:
// not measured (the SET's buckets could not be read).
func (d *dev) watchOutage(ctx context.Context, kind string, set configs.Set) (stop func() time.Duration) {
	var buckets []hongbao.Bucket
	if kind == killRouter || kind == moverKilled {
		for b := range hongbao.Buckets {
			buckets = append(buckets, hongbao.Bucket(b))
		}
	} else if bs, err := d.buckets(ctx, set.Name); err == nil {
		buckets = bs
	} else {
		return func() time.Duration { return -1 }
	}
	return d.l.watchWrites(buckets, outageTick)
}

// watchWrites samples every tick when a write to buckets was last
// acknowledged, until the returned stop, which answers the longest gap
// between two of them, the last one and the stop included. Its goroutine
// is the caller's: stop ends it.
func (l *load) watchWrites(buckets []hongbao.Bucket, tick time.Duration) (stop func() time.Duration) {
	done, longest := make(chan struct{}), make(chan time.Duration, 1)
	last := l.latestWrite(buckets)
	if last == 0 {
		last = time.Now().UnixNano()
	}
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		var gap int64
		step := func() {
			if cur := l.latestWrite(buckets); cur > last {
				gap, last = max(gap, cur-last), cur
			}
		}
		for {
			select {
			case <-t.C:
				step()
			case <-done:
				step()
				longest <- time.Duration(max(gap, time.Now().UnixNano()-last))
				return
			}
		}
	}()
	return func() time.Duration {
		close(done)
		return <-longest
	}
}

// latestWrite is when a write to one of buckets was last acknowledged, in
// Unix nanoseconds (0: never).
func (l *load) latestWrite(buckets []hongbao.Bucket) int64 {
	var latest int64
	for _, b := range buckets {
		latest = max(latest, l.lastWrite[b].Load())
	}
	return latest
}
