package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/devhosts"
	"github.com/hongbao-dev/hongbao/e2e/harness/devrun"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Fault kinds, in the table's order.
const (
	killServer    = "kill -9 SET server"
	killRouter    = "kill -9 router"
	killSettler   = "kill -9 settler"
	killArchiver  = "kill -9 archiver"
	killMariaDB   = "kill -9 SET MariaDB"
	killMemcached = "kill -9 memcached"
	pauseMariaDB  = "SIGSTOP/SIGCONT MariaDB"
	failover      = "kill -9 primary + failover"
	linkCut       = "replica link cut + failover"
	moverKilled   = "mover killed at a step"
)

var kinds = []string{killServer, killRouter, killSettler, killArchiver, killMariaDB, killMemcached, pauseMariaDB, failover, linkCut, moverKilled,
	partPrimaryReplica, cutReplicaPrimary, partRouterServer, partServerPrimary, partServerCore, partWatcherPrimary,
	isolateServer, powerLoss, halfDeadReplica, replicaThenPrimary, setPowerLoss, clockSkew}

// fault is one fault injected and how long until the component served
// again.
type fault struct {
	kind, target string
	at           time.Time
	recovery     time.Duration
	err          error // it did not recover (or could not be injected)
	skipped      string
	acked0       int64 // answers acknowledged when it was injected (its window's start)
	// outage is the longest time in which no write to the SET it hit was
	// acknowledged, from the last before it until its recovery (-1: not
	// measured; see watchOutage).
	outage time.Duration
}

// dev is the dev cluster the faults act on: its pid files (scripts/dev.sh's
// .run), its binaries and scripts/dev.sh to start MariaDB and memcached
// again.
type dev struct {
	cfg     *configs.Config
	config  string // the configuration's path
	run     string // pid files
	script  string // scripts/dev.sh
	bin     string // hbctl, hbarchive
	sets    []configs.Set
	replica bool // the configuration names replicas: failover can be tried
	rng     *rand.Rand
	hosts   *devhosts.File // the hosts of make up HOSTS=1 (nil: one host, no network faults)
	l       *load          // the clients: when each SET's writes were last acknowledged
	holdFor time.Duration  // the mean length of a partition (-hold)
	notes   io.Writer      // the run's output, for what a fault met on its way (a rejoin refused)
}

// inject runs one fault of kind and waits (at most 90 s) until what it hit
// serves again, and measures the longest outage of the writes meanwhile.
func (d *dev) inject(ctx context.Context, kind string) (f fault) {
	f = fault{kind: kind, at: time.Now()}
	set := d.sets[d.rng.IntN(len(d.sets))]
	if failsOver(kind) {
		set, f.skipped = d.failoverSet(set)
	}
	stop := d.watchOutage(ctx, kind, set)
	defer func() { f.outage = stop() }()
	switch kind {
	case killServer:
		i := d.rng.IntN(len(set.Servers))
		f.target = fmt.Sprintf("server %s%d", set.Name, i+1)
		f.recovery, f.err = d.killProc(ctx, fmt.Sprintf("server-%s%d", set.Name, i+1), "http://"+set.Servers[i]+"/readyz")
	case killRouter:
		f.target = "router r1"
		f.recovery, f.err = d.killProc(ctx, "router-r1", "http://"+d.cfg.Router.Listen+"/readyz")
	case killSettler:
		f.target = "settler " + set.Name
		if len(set.SettlerAdmin) == 0 {
			f.skipped = "no settler_admin in the configuration"
			break
		}
		f.recovery, f.err = d.killProc(ctx, "settler-"+set.Name, "http://"+set.SettlerAdmin[0]+"/readyz")
	case killArchiver:
		f.target = "hbarchive ensure -set " + set.Name
		f.recovery, f.err = d.killArchiver(ctx, set.Name)
	case killMariaDB:
		f.target, f.recovery, f.err = d.killPrimary(ctx, set)
	case killMemcached:
		f.target = "memcached " + set.Name
		f.recovery, f.err = d.killInfra(ctx, "memcached-"+set.Name, func() error { return pingMemcached(set.Memcached[0]) })
	case pauseMariaDB:
		pause := time.Duration(2000+d.rng.IntN(4000)) * time.Millisecond
		name, dsn := d.primary(ctx, set)
		f.target = fmt.Sprintf("MariaDB %s for %.1f s", name, pause.Seconds())
		f.recovery, f.err = d.pause(ctx, "mariadb-"+name, pause, func() error { return pingSQL(ctx, dsn) })
	case moverKilled:
		f.target, f.recovery, f.err = d.killMover(ctx)
	case clockSkew:
		f.target, f.recovery, f.err = d.skewClock(ctx, set)
	case failover, linkCut:
		f.target = "SET " + set.Name
		switch {
		case f.skipped != "":
		case kind == failover:
			f.recovery, f.err = d.failover(ctx, set)
		default:
			f.recovery, f.err = d.cutAndFailover(ctx, set)
		}
	default:
		d.injectNemesis(ctx, kind, set, &f)
	}
	return f
}

// pid reads a pid file of the dev cluster.
func (d *dev) pid(name string) (int, error) { return devrun.Pid(d.run, name) }

// killProc kills a supervised process with SIGKILL and waits until another
// process under its pid file answers ready.
func (d *dev) killProc(ctx context.Context, name, ready string) (time.Duration, error) {
	old, t0, err := d.kill(name)
	if err != nil {
		return 0, err
	}
	return until(ctx, t0, func() error {
		p, err := d.pid(name)
		if err != nil || p == old {
			return fmt.Errorf("%s not started again", name)
		}
		return httpOK(ready)
	})
}

// killInfra kills MariaDB or memcached with SIGKILL, starts it again with
// scripts/dev.sh infra and waits until it answers.
func (d *dev) killInfra(ctx context.Context, name string, answers func() error) (time.Duration, error) {
	_, t0, err := d.kill(name)
	if err != nil {
		return 0, err
	}
	if out, err := d.devsh(ctx, "infra"); err != nil {
		return time.Since(t0), fmt.Errorf("scripts/dev.sh infra after kill -9 of %s: %w\n%s", name, err, out)
	}
	return until(ctx, t0, answers)
}

// kill sends SIGKILL to the process under the dev cluster's pid file name;
// it returns that pid and the moment of the kill.
func (d *dev) kill(name string) (int, time.Time, error) {
	p, err := d.pid(name)
	if err != nil {
		return 0, time.Time{}, err
	}
	t0 := time.Now()
	if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
		return 0, t0, fmt.Errorf("kill %s: %w", name, err)
	}
	return p, t0, nil
}

// devsh runs scripts/dev.sh with args (it restarts the cluster's
// infrastructure or reseeds a replica).
func (d *dev) devsh(ctx context.Context, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, d.script, args...).CombinedOutput()
}

// pause stops a process with SIGSTOP for d, continues it and waits until it
// answers.
func (d *dev) pause(ctx context.Context, name string, pause time.Duration, answers func() error) (time.Duration, error) {
	p, err := d.pid(name)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
		return 0, err
	}
	time.Sleep(pause)
	if err := syscall.Kill(p, syscall.SIGCONT); err != nil {
		return time.Since(t0), err
	}
	return until(ctx, t0, answers)
}

// killArchiver starts `hbarchive ensure` of one SET (its day tables of
// today and archive.ahead_days, as the cron does), kills it with SIGKILL part-way and runs
// ensure and run again (each again 2 s after a failure, for up to 5
// minutes): recovered when both succeed.
func (d *dev) killArchiver(ctx context.Context, set string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(d.bin, "hbarchive"), "ensure", "-config", d.config, "-set", set)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	time.Sleep(time.Duration(200+d.rng.IntN(2000)) * time.Millisecond)
	t0 := time.Now()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	// As its systemd unit does (Restart=on-failure), run it again until it
	// succeeds: another fault (its MariaDB killed) may fail a run.
	for _, sub := range []string{"ensure", "run"} {
		for attempt := 1; ; attempt++ {
			out, err := exec.CommandContext(ctx, filepath.Join(d.bin, "hbarchive"), sub, "-config", d.config, "-set", set).CombinedOutput()
			if err == nil {
				break
			}
			if time.Since(t0) > 5*time.Minute {
				return time.Since(t0), fmt.Errorf("hbarchive %s after a kill, attempt %d: %w\n%s", sub, attempt, err, out)
			}
			time.Sleep(2 * time.Second)
		}
	}
	return time.Since(t0), nil
}

// until polls ok every 50 ms for up to 90 s; it returns the time since t0
// when ok first succeeded.
func until(ctx context.Context, t0 time.Time, ok func() error) (time.Duration, error) {
	deadline := t0.Add(90 * time.Second)
	for {
		err := ok()
		if err == nil {
			return time.Since(t0), nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Since(t0), fmt.Errorf("not recovered after %v: %w", time.Since(t0).Round(time.Second), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var probe = &http.Client{Timeout: time.Second}

// httpOK reports whether url answers 200.
func httpOK(url string) error {
	resp, err := probe.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// pingSQL reports whether a MariaDB answers a query.
func pingSQL(ctx context.Context, dsn string) error {
	db, err := sqldb.Open(dsn, 1)
	if err != nil {
		return err
	}
	defer db.Close()
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var one int
	return db.QueryRowContext(c, "SELECT 1").Scan(&one)
}

// pingMemcached reports whether a memcached answers "version".
func pingMemcached(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("version\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "VERSION") {
		return fmt.Errorf("memcached %s: %q %v", addr, line, err)
	}
	return nil
}

// namesReplicas reports whether the configuration file names replicas
// (a key with "replica" in it) and hbctl has `set failover`.
func namesReplicas(config, hbctl string) bool {
	b, err := os.ReadFile(config)
	if err != nil || !strings.Contains(strings.ToLower(uncommented(string(b))), "replica") {
		return false
	}
	out, _ := exec.Command(hbctl, "set", "failover", "-h").CombinedOutput()
	return strings.Contains(string(out), "failover")
}

// uncommented is YAML without its comments.
func uncommented(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		line, _, _ = strings.Cut(line, "#")
		b.WriteString(line + "\n")
	}
	return b.String()
}
