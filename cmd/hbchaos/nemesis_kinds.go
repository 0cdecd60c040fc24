package main

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
)

// The network nemesis's kinds, in the table's order after the kills.
const (
	partPrimaryReplica = "partition primary/replica"
	cutReplicaPrimary  = "one-way cut replica->primary"
	partRouterServer   = "partition router/server"
	partServerPrimary  = "partition server/primary"
	partServerCore     = "partition server/core"
	partWatcherPrimary = "partition watcher/primary"
	isolateServer      = "SET server's host isolated"
	powerLoss          = "power loss of a host"
	halfDeadReplica    = "half-dead replica (SIGSTOP)"
	replicaThenPrimary = "replica restart then primary lost"
	setPowerLoss       = "power loss of a whole SET"
)

// netKinds need the hosts of make up HOSTS=1; the others run on one host
// too.
var netKinds = []string{partPrimaryReplica, cutReplicaPrimary, partRouterServer, partServerPrimary,
	partServerCore, partWatcherPrimary, isolateServer, powerLoss, setPowerLoss}

// injectNemesis runs one fault of the nemesis's kinds on SET set.
func (d *dev) injectNemesis(ctx context.Context, kind string, set configs.Set, f *fault) {
	if d.hosts == nil && slices.Contains(netKinds, kind) {
		f.skipped = noHosts
		return
	}
	primary, _ := d.primary(ctx, set)
	replica := replicaName(set, primary)
	if kind == halfDeadReplica || kind == replicaThenPrimary || kind == partPrimaryReplica || kind == cutReplicaPrimary {
		if len(set.Replicas) == 0 {
			f.skipped = "the configuration names no replicas"
			return
		}
	}
	server, ready := d.serverOf(set)
	serves, err := d.writes(ctx, set)
	if err != nil {
		f.err = err
		return
	}
	withReady := func(since time.Time) error {
		if err := httpOK(ready); err != nil {
			return err
		}
		return serves(since)
	}
	pair := func(a, b string, oneWay bool, probe func(time.Time) error) {
		f.target = a + " / " + b
		f.recovery, f.err = d.partition(ctx, []string{a}, []string{b}, oneWay, probe)
	}
	switch kind {
	case partPrimaryReplica:
		pair("mariadb-"+primary, "mariadb-"+replica, false, serves)
	case cutReplicaPrimary:
		pair("mariadb-"+replica, "mariadb-"+primary, true, serves)
	case partRouterServer:
		pair("router-r1", server, false, withReady)
	case partServerPrimary:
		pair(server, "mariadb-"+primary, false, withReady)
	case partServerCore:
		f.target = server + " / core group"
		f.recovery, f.err = d.partition(ctx, []string{server}, []string{"mariadb-core", "mariadb-core-replica"}, false, withReady)
	case partWatcherPrimary:
		pair("watch-w1", "mariadb-"+primary, false, func(since time.Time) error {
			// The watchdog reaches no primary, but its replica still
			// replicates from it: it must not have failed the SET over.
			if now, _ := d.primary(ctx, set); now != primary {
				return fmt.Errorf("the watchdog failed SET %s over (%s -> %s) while its primary served", set.Name, primary, now)
			}
			return serves(since)
		})
	case isolateServer:
		f.target = server
		f.recovery, f.err = d.down(ctx, []string{server}, nil, withReady)
	case powerLoss:
		f.target, f.recovery, f.err = d.hostPowerLoss(ctx, set, replica, server, ready, serves)
	case setPowerLoss:
		f.target = "SET " + set.Name
		keys := []string{"settler-" + set.Name, "mariadb-" + set.Name, "mariadb-" + set.Name + "-replica", "memcached-" + set.Name}
		for i := range set.Servers {
			keys = append(keys, fmt.Sprintf("server-%s%d", set.Name, i+1))
		}
		f.recovery, f.err = d.down(ctx, keys, keys, serves)
	case halfDeadReplica:
		f.target = "MariaDB " + replica
		f.recovery, f.err = d.halfDead(ctx, "mariadb-"+replica, serves)
	case replicaThenPrimary: // its SET picked by failoverSet (inject)
		if f.skipped != "" {
			return
		}
		primary, _ = d.primary(ctx, set)
		replica = replicaName(set, primary)
		f.target = fmt.Sprintf("SET %s: %s restarted, %s killed", set.Name, replica, primary)
		f.recovery, f.err = d.restartThenFailover(ctx, set, replica)
	}
}

// hostPowerLoss is the power loss of one host of set: a server's, its
// settler's or its replica MariaDB's, picked at random. Recovered when
// the SET's writes are acknowledged again and the process on that host
// answers again.
func (d *dev) hostPowerLoss(ctx context.Context, set configs.Set, replica, server, ready string, serves func(time.Time) error) (string, time.Duration, error) {
	up := map[string]func() error{server: func() error { return httpOK(ready) }}
	if len(set.SettlerAdmin) > 0 {
		up["settler-"+set.Name] = func() error { return httpOK("http://" + set.SettlerAdmin[0] + "/readyz") }
	}
	if len(set.Replicas) > 0 {
		dsn := set.Replicas[0]
		if replica == set.Name {
			dsn = set.MySQLDSN
		}
		up["mariadb-"+replica] = func() error { return pingSQL(ctx, dsn) }
	}
	keys := make([]string, 0, len(up))
	for k := range up {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	key := keys[d.rng.IntN(len(keys))]
	rec, err := d.down(ctx, []string{key}, []string{key}, func(since time.Time) error {
		if err := up[key](); err != nil {
			return err
		}
		return serves(since)
	})
	return key, rec, err
}

// down isolates the hosts of keys and kills the processes of killed
// (with SIGKILL, their supervisors held with SIGSTOP so that nothing
// restarts them on a dead host) for d.hold(); then it rejoins the hosts,
// lets the supervisors restart their processes, starts MariaDB and
// memcached again (scripts/dev.sh infra) and waits until serves answers.
// It returns the time from the rejoin.
func (d *dev) down(ctx context.Context, keys, killed []string, serves func(since time.Time) error) (time.Duration, error) {
	var hs []func() error
	var sups []int
	var err error
	for _, k := range keys {
		var h func() error
		if h, err = d.isolate(ctx, k); err != nil {
			break
		}
		hs = append(hs, h)
	}
	infra := false
	for _, k := range killed {
		if err != nil {
			break
		}
		if sup, serr := d.pid("sup-" + k); serr == nil {
			if err = syscall.Kill(sup, syscall.SIGSTOP); err != nil {
				err = fmt.Errorf("SIGSTOP the supervisor of %s: %w", k, err)
				break
			}
			sups = append(sups, sup)
		} else {
			infra = true // MariaDB and memcached: scripts/dev.sh infra
		}
		_, _, err = d.kill(k)
	}
	if err == nil {
		time.Sleep(d.hold())
	}
	if herr := heals(hs); err == nil {
		err = herr
	}
	for _, sup := range sups {
		if cerr := syscall.Kill(sup, syscall.SIGCONT); cerr != nil && err == nil {
			err = fmt.Errorf("SIGCONT supervisor %d: %w", sup, cerr)
		}
	}
	if err != nil {
		return 0, err
	}
	healed := time.Now()
	if infra {
		if out, err := d.devsh(ctx, "infra"); err != nil {
			return time.Since(healed), fmt.Errorf("scripts/dev.sh infra after a power loss: %w\n%s", err, out)
		}
	}
	return until(ctx, healed, func() error { return serves(healed) })
}

// restartThenFailover kills SET set's replica (SIGKILL), starts it again
// and, as soon as it answers, kills the primary and fails over to it
// (failover): whatever the replica acknowledged before its crash must
// survive its restart, or the promotion loses it.
func (d *dev) restartThenFailover(ctx context.Context, set configs.Set, replica string) (time.Duration, error) {
	_, t0, err := d.kill("mariadb-" + replica)
	if err != nil {
		return 0, err
	}
	if out, err := d.devsh(ctx, "infra"); err != nil {
		return time.Since(t0), fmt.Errorf("scripts/dev.sh infra after kill -9 of %s: %w\n%s", replica, err, out)
	}
	dsn := set.MySQLDSN
	if replica != set.Name {
		dsn = set.Replicas[0]
	}
	if _, err := until(ctx, time.Now(), func() error { return pingSQL(ctx, dsn) }); err != nil {
		return time.Since(t0), err
	}
	_, err = d.failover(ctx, set)
	return time.Since(t0), err
}

// halfDead stops the MariaDB name with SIGSTOP for d.hold() (its kernel
// still accepts connections; nothing answers), continues it and waits
// until serves answers; the time from SIGCONT.
func (d *dev) halfDead(ctx context.Context, name string, serves func(since time.Time) error) (time.Duration, error) {
	p, err := d.pid(name)
	if err != nil {
		return 0, err
	}
	if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
		return 0, fmt.Errorf("SIGSTOP %s: %w", name, err)
	}
	time.Sleep(d.hold())
	if err := syscall.Kill(p, syscall.SIGCONT); err != nil {
		return 0, fmt.Errorf("SIGCONT %s: %w", name, err)
	}
	healed := time.Now()
	return until(ctx, healed, func() error { return serves(healed) })
}
