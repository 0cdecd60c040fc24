package main

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/hosts"
)

// The network nemesis: faults between the hosts of make up HOSTS=1 (a
// network namespace per process, e2e/harness/devhosts). A cut is a
// blackhole route in the sending host (ip route replace blackhole
// ADDR/32): its packets to ADDR vanish, no FIN, no RST, as on a dead link;
// a cut on both hosts is a symmetric partition. Every fault is healed
// before it returns, and its recovery is the time from the heal until the
// SET it hit acknowledges writes again (the clients' own answers).

// noHosts is why a network fault is skipped on one host.
const noHosts = "the cluster runs on one host (no -hosts hosts.json: make chaos HOSTS=1)"

// hold is how long a partition lasts: 0.6 to 1.6 times -hold (3 to 8 s
// by default: longer than the clients' first retries, shorter than the
// watchdog's patience).
func (d *dev) hold() time.Duration {
	return time.Duration(float64(d.holdFor) * (0.6 + d.rng.Float64()))
}

// host is the host of the process whose key (its pid file's stem) is
// key: mariadb-a, server-a1, watch-w1, as hosts.json names it.
func (d *dev) host(key string) (*hosts.Host, error) {
	prefix, err := netip.ParsePrefix(d.hosts.Prefix)
	if err != nil {
		return nil, fmt.Errorf("hosts.json prefix: %w", err)
	}
	for _, h := range d.hosts.Hosts {
		if h.Host == key {
			a, err := netip.ParseAddr(h.Addr)
			return hosts.Attach(h.Host, h.NetNS, a, prefix), err
		}
	}
	return nil, fmt.Errorf("hosts.json has no host %s", key)
}

// cut is a one-way cut: what the host of from sends to the host of to
// is dropped (hosts.Host.Cut). It returns the heal.
func (d *dev) cut(ctx context.Context, from, to string) (func() error, error) {
	src, err := d.host(from)
	if err != nil {
		return nil, err
	}
	dst, err := d.host(to)
	if err != nil {
		return nil, err
	}
	if err := src.Cut(ctx, dst.Addr); err != nil {
		return nil, err
	}
	return func() error { return src.Heal(context.WithoutCancel(ctx), dst.Addr) }, nil
}

// isolate cuts the host of key off from every other and from hbchaos
// (hosts.Host.Isolate). It returns the heal, which puts its routes back
// as devhosts made them.
func (d *dev) isolate(ctx context.Context, key string) (func() error, error) {
	h, err := d.host(key)
	if err != nil {
		return nil, err
	}
	if err := h.Isolate(ctx); err != nil {
		return nil, err
	}
	return func() error { return h.Rejoin(context.WithoutCancel(ctx)) }, nil
}

// heals runs every heal, the last made first; it returns the first
// error (the others are healed all the same).
func heals(hs []func() error) error {
	var first error
	for i := len(hs) - 1; i >= 0; i-- {
		if err := hs[i](); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// partition cuts every pair of as and bs (both ways, or only a to b when
// oneWay) for d.hold(), heals, and waits until serves answers. It
// returns the time from the heal.
func (d *dev) partition(ctx context.Context, as, bs []string, oneWay bool, serves func(since time.Time) error) (time.Duration, error) {
	var hs []func() error
	cut := func(from, to string) error {
		h, err := d.cut(ctx, from, to)
		if err == nil {
			hs = append(hs, h)
		}
		return err
	}
	var err error
	for _, a := range as {
		for _, b := range bs {
			if err = cut(a, b); err == nil && !oneWay {
				err = cut(b, a)
			}
			if err != nil {
				break
			}
		}
	}
	if err == nil {
		time.Sleep(d.hold())
	}
	if herr := heals(hs); err == nil {
		err = herr
	}
	if err != nil {
		return 0, err
	}
	healed := time.Now()
	return until(ctx, healed, func() error { return serves(healed) })
}

// writes is the probe of a SET's recovery: a write to one of its buckets
// acknowledged to a client after since, and each of ready answering.
func (d *dev) writes(ctx context.Context, set configs.Set, ready ...string) (func(since time.Time) error, error) {
	buckets, err := d.buckets(ctx, set.Name)
	if err != nil {
		return nil, err
	}
	return func(since time.Time) error {
		for _, url := range ready {
			if err := httpOK(url); err != nil {
				return err
			}
		}
		return d.l.wroteSince(buckets, since)
	}, nil
}

// buckets are the buckets SET name owns now (the meta database's map).
func (d *dev) buckets(ctx context.Context, name string) ([]hongbao.Bucket, error) {
	t, err := d.topology(ctx)
	if err != nil {
		return nil, err
	}
	bs := t.Buckets(name)
	if len(bs) == 0 {
		return nil, fmt.Errorf("SET %s owns no bucket", name)
	}
	return bs, nil
}

// replicaName is the name of SET set's MariaDB that is not primary (the
// dev cluster has one replica per SET).
func replicaName(set configs.Set, primary string) string {
	if primary == set.Name {
		return set.Name + "-replica"
	}
	return set.Name
}

// ready waits (up to 3 minutes) until the router and every SET server
// answer /readyz.
func (d *dev) ready(ctx context.Context) error {
	urls := []string{"http://" + d.cfg.Router.Listen + "/readyz"}
	for _, set := range d.sets {
		for _, s := range set.Servers {
			urls = append(urls, "http://"+s+"/readyz")
		}
	}
	t0 := time.Now()
	for _, u := range urls {
		for httpOK(u) != nil {
			if time.Since(t0) > 3*time.Minute || ctx.Err() != nil {
				return fmt.Errorf("the cluster is not ready: %w", httpOK(u))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// serverOf picks one of set's servers: its key (server-a1) and the URL
// of its readiness.
func (d *dev) serverOf(set configs.Set) (key, ready string) {
	i := d.rng.IntN(len(set.Servers))
	return fmt.Sprintf("server-%s%d", set.Name, i+1), "http://" + set.Servers[i] + "/readyz"
}
