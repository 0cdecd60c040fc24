package watch_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/failover"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/replication"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// watchFlags are the watcher's probing flags in these tests; --after is
// each test's.
var watchFlags = []string{"--interval", "200ms", "--probe-timeout", "500ms"}

// startWatch starts hbctl set watch b with --after after (and more args)
// and waits until it is armed: every replica seen replicating from the
// primary.
func startWatch(t *testing.T, c *clustertest.Cluster, env []string, after time.Duration, more ...string) *clustertest.Process {
	t.Helper()
	return startWatching(t, c, env, append([]string{"set", "watch", "b", "--after", after.String()}, more...)...)
}

// startWatching starts hbctl with args (a watch command) and the test's
// probing flags, and waits until it is armed.
func startWatching(t *testing.T, c *clustertest.Cluster, env []string, args ...string) *clustertest.Process {
	t.Helper()
	// The cluster's configuration logs at warn: the watcher's steps are at info.
	w := c.StartCtl(t, append(env, "HB_LOG_LEVEL=info"), append(args, watchFlags...)...)
	waitLog(t, w, "armed: every replica replicates from the primary", 30*time.Second)
	return w
}

// stopWatch stops the watcher with SIGTERM and fails the test unless it
// exits at once, cleanly.
func stopWatch(t *testing.T, w *clustertest.Process) {
	t.Helper()
	if err := w.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"msg":"stopped"`, "exit: exit status 0"} {
		if !strings.Contains(readLog(t, w), want) {
			t.Errorf("the watcher's log after SIGTERM lacks %q", want)
		}
	}
}

// readLog returns the watcher's log so far.
func readLog(t *testing.T, w *clustertest.Process) string {
	t.Helper()
	return readLogFile(t, w.Log)
}

// readLogFile returns the log at path so far.
func readLogFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitLog waits until the watcher's log holds want, failing the test
// after within.
func waitLog(t *testing.T, w *clustertest.Process, want string, within time.Duration) {
	t.Helper()
	waitLogFrom(t, w, 0, want, within)
}

// waitLogFrom is waitLog in the log from byte from on.
func waitLogFrom(t *testing.T, w *clustertest.Process, from int, want string, within time.Duration) {
	t.Helper()
	waitLogFileFrom(t, w.Log, from, want, within)
}

// waitLogFileFrom is waitLogFrom in the log at path.
func waitLogFileFrom(t *testing.T, path string, from int, want string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(readLogFile(t, path)[from:], want) {
		if time.Now().After(deadline) {
			t.Fatalf("the watcher's log lacks %q after %v:\n%s", want, within, readLogFile(t, path))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// localWatch is the watchdog of a SET run in this process, as hbctl set
// watch runs it, logging to a file.
type localWatch struct {
	log    string // the log's path
	cancel context.CancelFunc
	done   chan struct{}
}

// startLocalWatch watches SET name of c in this process with the test's
// probing flags and --after after, its connections dialled by dial (the
// failover package's knob: a test cuts the watcher alone off from a
// server), and waits until it is armed.
func startLocalWatch(t *testing.T, c *clustertest.Cluster, name string, after time.Duration,
	dial func(ctx context.Context, network, addr string) (net.Conn, error)) *localWatch {
	t.Helper()
	cfg, err := configs.Load(c.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &localWatch{log: filepath.Join(t.TempDir(), "watch.log"), done: make(chan struct{})}
	zc := zap.NewProductionConfig()
	zc.Sampling, zc.OutputPaths = nil, []string{w.log}
	log, err := zc.Build()
	if err != nil {
		t.Fatal(err)
	}
	log = log.With(zap.String("process", "hbctl-set-watch"))
	meta, err := topology.OpenMeta(context.Background(), cfg.MetaDSN, cfg.CoreMembers(), false)
	if err != nil {
		t.Fatal(err)
	}
	r := failover.New(cfg.Replication)
	r.Dial = dial
	o := failover.WatchOptions{After: after, Interval: 200 * time.Millisecond, ProbeTimeout: 500 * time.Millisecond}
	ws := []*failover.Watcher{r.NewWatcher(r.SetTarget(meta, name), o, log.With(zap.String("set", name)), nil)}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() {
		defer close(w.done)
		defer meta.Close()
		failover.Watch(ctx, log, o, ws)
	}()
	t.Cleanup(w.stop)
	waitLogFileFrom(t, w.log, 0, "armed: every replica replicates from the primary", 30*time.Second)
	return w
}

// stop stops the watcher as SIGTERM stops hbctl set watch, and waits for
// it.
func (w *localWatch) stop() {
	w.cancel()
	<-w.done
}

// stopLocalWatch stops the watcher and fails the test unless it stops at
// once, saying so.
func stopLocalWatch(t *testing.T, w *localWatch) {
	t.Helper()
	stopped := make(chan struct{})
	go func() { w.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher did not stop within 10s of its context's end")
	}
	if !strings.Contains(readLogFile(t, w.log), `"msg":"stopped"`) {
		t.Errorf("the watcher's log after its stop lacks %q", `"msg":"stopped"`)
	}
}

// dialVia is a dialer that dials to instead of from (a proxy standing for
// the path between the watcher and a server), every other address as it
// is.
func dialVia(from, to string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == from {
			addr = to
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
}

// metaSet is SET name's MySQL and replicas as the meta database has them.
func metaSet(t *testing.T, c *clustertest.Cluster, name string) (primary, replicas string) {
	t.Helper()
	if err := c.Meta().QueryRow("SELECT mysql_dsn, replicas FROM hb_meta.sets WHERE name = ?", name).Scan(&primary, &replicas); err != nil {
		t.Fatal(err)
	}
	return primary, replicas
}

// waitPrimary waits until the meta database names another MySQL than old
// for SET b and returns how long it took from since.
func waitPrimary(t *testing.T, c *clustertest.Cluster, old string, since time.Time, within time.Duration) time.Duration {
	t.Helper()
	for {
		if p, _ := metaSet(t, c, "b"); p != old {
			return time.Since(since)
		}
		if time.Since(since) > within {
			t.Fatalf("the meta database still names %s SET b's MySQL %v after its primary's kill", old, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitAcks waits until the load has acknowledged more opens than when
// called (at most a minute).
func waitAcks(t *testing.T, l *ctltest.TimedLoad, more int) {
	t.Helper()
	count := l.Acked
	want := count() + more
	deadline := time.Now().Add(time.Minute)
	for count() < want {
		if time.Now().After(deadline) {
			t.Fatalf("the load has %d acknowledged opens after a minute, want %d", count(), want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWatchKilledPrimary (a): SET b is a primary and one replica, watched
// with --after 3s and --accept-single-copy (the explicit choice the one
// replica needs, which the log states). Its primary is killed (kill -9)
// under load: the watcher promotes the replica within --after plus some
// seconds, the meta database names it, sends and opens go on through the
// store on it, and no open acknowledged before (or after) the kill is lost.
func TestWatchKilledPrimary(t *testing.T) {
	const after = 3 * time.Second
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000_000, Replicated: []string{"b"}, ServersPerSet: 1, SweepAfter: ctltest.SweepAfter})
	b := c.Set("b")
	w := startWatch(t, c, nil, after, "--accept-single-copy")
	old, _ := metaSet(t, c, "b")
	l := &ctltest.TimedLoad{}
	stop := make(chan struct{})
	wg := l.Run(c, 8, stop)
	// Enough opens on either side of the kill, however busy the machine.
	waitAcks(t, l, 120)
	b.Group.Primary.Stop()
	killed := time.Now()
	took := waitPrimary(t, c, old, killed, after+20*time.Second)
	t.Logf("the meta database names the new primary %v after the kill (--after %v)", took.Round(time.Millisecond), after)
	if took < after {
		t.Errorf("failed over %v after the kill, before --after %v", took, after)
	}
	waitAcks(t, l, 120)
	close(stop)
	wg.Wait()

	if p, replicas := metaSet(t, c, "b"); p != b.Group.Replicas[0].AppDSN() || replicas != b.Group.Primary.AppDSN() {
		t.Errorf("the meta database has SET b on %q with replicas %q; want %q with %q", p, replicas, b.Group.Replicas[0].AppDSN(), b.Group.Primary.AppDSN())
	}
	if m := c.Follow(t, "b"); m != b.Group.Replicas[0] {
		t.Fatalf("SET b's MySQL is port %d, want its replica's %d", m.Port, b.Group.Replicas[0].Port)
	}
	id, shares := ctltest.SendInto(t, c, ctltest.BucketsOf(t, c, "b")[0], 3, 2)
	ctltest.SameShares(t, "a packet sent after the failover, on the new primary", dbtest.CheckPacket(t, c.DB("b"), id).Shares, shares)
	gap := l.Check(t, c, "b", killed)
	t.Logf("SET b without acknowledged opens for %v after the kill", gap.Round(time.Millisecond))

	log := readLog(t, w)
	for _, want := range []string{
		"a streak of failed probes begins", "--accept-single-copy: an automatic failover",
		"the primary is dead: failing over", "lost it (Slave_IO_Running", "promoted 127.0.0.1:",
		"--accept-single-copy: it replicates asynchronously", "automatic failover done",
		fmt.Sprintf(`"new_primary":"127.0.0.1:%d"`, b.Group.Replicas[0].Port),
		"disarmed after the automatic failover",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the watcher's log lacks %q", want)
		}
	}
	stopWatch(t, w)
}

// TestWatchNoFailover: SET b (a primary and one replica) is watched with
// --after 3s; faults that must not fail it over, one after the other:
//   - (b) its primary paused (SIGSTOP) for less than --after, then resumed;
//   - (c) the watcher alone cut off from the primary (its connections go
//     through a proxy that stops forwarding: the watcher runs in this
//     process, dialling through the failover package's Dial knob) for
//     longer than --after, while the replica still replicates: the log
//     says why it does not.
//
// After each, the meta database names the same primary, the replica
// still replicates from it, and SET b sends and opens.
func TestWatchNoFailover(t *testing.T) {
	const after = 3 * time.Second
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000_000, Replicated: []string{"b"}, ServersPerSet: 1, SweepAfter: ctltest.SweepAfter})
	g := c.Set("b").Group
	proxy := startProxy(t, fmt.Sprintf("127.0.0.1:%d", g.Primary.Port))
	w := startLocalWatch(t, c, "b", after, dialVia(fmt.Sprintf("127.0.0.1:%d", g.Primary.Port), proxy.addr()))
	old, oldReplicas := metaSet(t, c, "b")
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T)
		logs  []string // what the watcher must log, in this order, after the fault began
	}{
		{"primary paused shorter than --after", func(t *testing.T) {
			if err := g.Primary.Pause(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(after / 2)
			if err := g.Primary.Resume(); err != nil {
				t.Fatal(err)
			}
		}, []string{"a streak of failed probes begins", "the primary answers again"}},
		{"watcher cut off from the primary", func(t *testing.T) {
			from := len(readLogFile(t, w.log))
			proxy.cut(true)
			// Cut until the watcher decided (after --after, however long
			// a loaded machine takes to get there), then a while more.
			time.Sleep(after)
			waitLogFileFrom(t, w.log, from, "no failover: replica", 30*time.Second)
			time.Sleep(after)
			proxy.cut(false)
		}, []string{"a streak of failed probes begins",
			fmt.Sprintf("no failover: replica 127.0.0.1:%d still receives from it (Slave_IO_Running Yes): the primary lives, the watcher's own path to it is cut", g.Replicas[0].Port),
			"the primary answers again"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := len(readLogFile(t, w.log))
			tc.fault(t)
			waitLogFileFrom(t, w.log, from, tc.logs[len(tc.logs)-1], 30*time.Second)
			log := readLogFile(t, w.log)[from:]
			at := 0
			for _, want := range tc.logs {
				i := strings.Index(log[at:], want)
				if i < 0 {
					t.Fatalf("the watcher's log lacks %q (in order) after the fault:\n%s", want, log)
				}
				at += i
			}
			if strings.Contains(log, "failing over") || strings.Contains(log, "promoted") {
				t.Errorf("the watcher failed over:\n%s", log)
			}
			if p, r := metaSet(t, c, "b"); p != old || r != oldReplicas {
				t.Errorf("the meta database has SET b on %q with replicas %q; want %q with %q", p, r, old, oldReplicas)
			}
			ctltest.CheckFollowers(t, g, g.Primary, nil)
			ctltest.SendInto(t, c, ctltest.BucketsOf(t, c, "b")[0], 2, 2)
		})
	}
	stopLocalWatch(t, w)
	ctltest.WaitOutbox(t, c)
	c.CheckInvariants(t)
}

// TestWatchNoFlap (d): SET b is a primary and two replicas, watched with
// --after 2s. Its primary is killed: the watcher promotes a replica, the
// other follows it. Without a rejoin of the old primary, the new primary
// is killed too: the watcher does not fail over again (the old primary
// replicates from nobody), says so, and leaves the meta database and the
// remaining replica as they were.
func TestWatchNoFlap(t *testing.T) {
	const after = 2 * time.Second
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000_000, Replicated: []string{"b"}, Replicas: 2, ServersPerSet: 1})
	g := c.Set("b").Group
	w := startWatch(t, c, nil, after)
	ctltest.SendInto(t, c, ctltest.BucketsOf(t, c, "b")[0], 2, 2)
	old, _ := metaSet(t, c, "b")
	g.Primary.Stop()
	waitPrimary(t, c, old, time.Now(), after+20*time.Second)
	waitLog(t, w, "disarmed after the automatic failover", 10*time.Second)
	second := c.Follow(t, "b")
	var other *dbtest.MariaDB
	for _, r := range g.Replicas {
		if r != second {
			other = r
		}
	}
	ctltest.CheckFollowers(t, g, second, g.Primary)
	ctltest.SendInto(t, c, ctltest.BucketsOf(t, c, "b")[0], 2, 2) // SET b writes, each commit on two machines

	primary, replicas := metaSet(t, c, "b")
	from := len(readLog(t, w))
	second.Stop()
	waitLogFrom(t, w, from, "no failover: not armed (no flapping)", after+10*time.Second)
	time.Sleep(after)
	log := readLog(t, w)[from:]
	if strings.Contains(log, "failing over") || strings.Contains(log, "promoted") {
		t.Errorf("the watcher failed over a second time:\n%s", log)
	}
	if want := fmt.Sprintf("replica(s) 127.0.0.1:%d not seen replicating", g.Primary.Port); !strings.Contains(log, want) {
		t.Errorf("the watcher's log lacks %q:\n%s", want, log)
	}
	if p, r := metaSet(t, c, "b"); p != primary || r != replicas {
		t.Errorf("the meta database has SET b on %q with replicas %q; want %q with %q (no second failover)", p, r, primary, replicas)
	}
	db, err := sqldb.Open(other.DSN, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := replication.ReplicaStatus(context.Background(), db)
	var ro int
	if err == nil {
		err = db.QueryRow("SELECT @@GLOBAL.read_only").Scan(&ro)
	}
	if err != nil || ro != 1 || !st.Configured || st.MasterPort != second.Port || st.IORunning == "Yes" {
		t.Errorf("the remaining replica: %+v, read_only %d, %v; want read-only, a replica of port %d that lost it", st, ro, err, second.Port)
	}

	// The operator's failover, refused while another holds the SET's
	// failover lock (as the watcher does while it fails over), then run:
	// the watcher watches the new primary.
	ctx := context.Background()
	conn, err := c.Meta().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got int
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK('hb_failover:b', 0)").Scan(&got); err != nil || got != 1 {
		t.Fatalf("GET_LOCK: %d, %v", got, err)
	}
	out, err := c.Ctl("set", "failover", "b")
	if err == nil || !strings.Contains(out, "another failover or rejoin of the SET is running") {
		t.Errorf("hbctl set failover b while its lock is held: %v\n%s", err, out)
	}
	if _, err := conn.ExecContext(ctx, "SELECT RELEASE_LOCK('hb_failover:b')"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	from = len(readLog(t, w))
	out = c.MustCtl(t, "set", "failover", "b")
	t.Logf("hbctl set failover b:\n%s", out)
	if p, _ := metaSet(t, c, "b"); p != other.AppDSN() {
		t.Errorf("SET b's MySQL after the operator's failover is %q, want %q", p, other.AppDSN())
	}
	waitLogFrom(t, w, from, fmt.Sprintf(`"msg":"watching SET b","process":"hbctl-set-watch","set":"b","primary":"127.0.0.1:%d"`, other.Port), 10*time.Second)
	stopWatch(t, w)
}

// TestCoreWatch: the core group (the meta and wallet databases) is a
// primary and one replica, watched by hbctl core watch --after 2s
// --accept-single-copy. Its primary is killed: the watcher promotes the
// replica (a new failover epoch, which every process follows), sends are
// acknowledged again with their wallet debits on it, and the watcher is
// disarmed (its only replica is the dead old primary).
func TestCoreWatch(t *testing.T) {
	const after = 2 * time.Second
	c := clustertest.Start(t, clustertest.Options{DevGrant: ctltest.DevGrant, Sets: 1, ServersPerSet: 1, Core: 1})
	p, r := c.Core.Primary, c.Core.Replicas[0]
	w := startWatching(t, c, nil, "core", "watch", "--after", after.String(), "--accept-single-copy")
	bs := ctltest.BucketsOf(t, c, "a")
	ctltest.SendInto(t, c, bs[0], 2, 2)
	ctltest.WaitOutbox(t, c)
	p.Stop()
	killed := time.Now()
	waitLog(t, w, "automatic failover done", after+20*time.Second)
	t.Logf("the core group failed over %v after its primary's kill", time.Since(killed).Round(time.Millisecond))
	if m := ctltest.WritableMember(t, c.Core); m != r {
		t.Fatalf("the writable member of the core group is %v, want its replica (port %d)", m, r.Port)
	}
	ctltest.SendInto(t, c, bs[1], 2, 2)
	ctltest.WaitOutbox(t, c)
	waitLog(t, w, "disarmed after the automatic failover", 10*time.Second)
	for _, want := range []string{"the primary is dead: failing over", "failover epoch", fmt.Sprintf(`"new_primary":"127.0.0.1:%d"`, r.Port)} {
		if !strings.Contains(readLog(t, w), want) {
			t.Errorf("the watcher's log lacks %q", want)
		}
	}
	stopWatch(t, w)
	c.CheckInvariants(t)
}

// proxy forwards TCP connections to a server until cut: then it closes
// them and holds new ones without a byte either way, as a network that
// drops packets does.
type proxy struct {
	ln net.Listener
	to string

	mu    sync.Mutex
	off   bool
	conns []net.Conn
}

// startProxy starts a proxy to the server at to, closed when the test ends.
func startProxy(t *testing.T, to string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, to: to}
	t.Cleanup(func() {
		ln.Close()
		p.closeAll()
	})
	go p.serve()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// cut stops (true) or resumes (false) forwarding.
func (p *proxy) cut(off bool) {
	p.mu.Lock()
	p.off = off
	p.mu.Unlock()
	p.closeAll()
}

func (p *proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		off := p.off
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		if off {
			continue // held silent until closed
		}
		go p.forward(c)
	}
}

func (p *proxy) forward(c net.Conn) {
	s, err := net.Dial("tcp", p.to)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, s)
	p.mu.Unlock()
	go func() {
		io.Copy(s, c)
		s.Close()
	}()
	io.Copy(c, s)
	c.Close()
}
