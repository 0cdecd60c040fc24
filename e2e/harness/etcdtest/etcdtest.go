// Package etcdtest starts a real etcd cluster (Debian's etcd-server, three
// members by default) on free loopback ports for one test, with the
// members' processes at hand to kill and restart. The test fails, never
// skips, when etcd is missing: scripts/dev.sh test-env installs it.
package etcdtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// Cluster is a running etcd cluster.
type Cluster struct {
	t       testing.TB
	dir     string
	members []*Member
}

// Member is one etcd process.
type Member struct {
	Name   string
	Client string // host:port clients dial
	peer   string
	args   []string
	log    string
	cmd    *exec.Cmd
	done   chan struct{}
}

// Start starts an n-member cluster and waits until it answers; it is
// stopped when the test ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	dbtest.Need(t) // real processes: not under -short
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("etcd is not installed (scripts/dev.sh deps installs etcd-server): %v", err)
	}
	c := &Cluster{t: t, dir: t.TempDir()}
	var initial []string
	for i := range n {
		// Ports out of the ephemeral range, reserved for this binary: one
		// from the kernel's :0 may be taken by an outgoing connection
		// before etcd binds it (a loaded make test met that).
		m := &Member{Name: fmt.Sprintf("m%d", i), Client: clustertest.FreeAddr(t), peer: clustertest.FreeAddr(t)}
		c.members = append(c.members, m)
		initial = append(initial, m.Name+"=http://"+m.peer)
	}
	for _, m := range c.members {
		m.log = filepath.Join(c.dir, m.Name+".log")
		m.args = []string{"--name", m.Name, "--data-dir", filepath.Join(c.dir, m.Name),
			"--listen-client-urls", "http://" + m.Client, "--advertise-client-urls", "http://" + m.Client,
			"--listen-peer-urls", "http://" + m.peer, "--initial-advertise-peer-urls", "http://" + m.peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", filepath.Base(c.dir),
			// Fast elections: a lost leader is replaced within a second.
			"--heartbeat-interval", "50", "--election-timeout", "500", "--logger", "zap"}
		c.start(bin, m)
	}
	t.Cleanup(c.stop)
	c.WaitHealthy(30 * time.Second)
	return c
}

// Endpoints are the members' client addresses.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.Client)
	}
	return out
}

// Members are the cluster's processes.
func (c *Cluster) Members() []*Member { return c.members }

func (c *Cluster) start(bin string, m *Member) {
	c.t.Helper()
	f, err := os.OpenFile(m.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	m.cmd = exec.Command(bin, m.args...)
	m.cmd.Stdout, m.cmd.Stderr = f, f
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		c.t.Fatalf("start etcd %s: %v", m.Name, err)
	}
	m.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); f.Close(); close(done) }(m.cmd, m.done)
}

// Kill kills member m with SIGKILL and waits for it to exit.
func (c *Cluster) Kill(m *Member) {
	_ = m.cmd.Process.Kill()
	<-m.done
}

// Restart starts a killed member again on its data.
func (c *Cluster) Restart(m *Member) {
	c.t.Helper()
	bin, _ := exec.LookPath("etcd")
	args := append([]string(nil), m.args...)
	for i, a := range args {
		if a == "new" {
			args[i] = "existing"
		}
	}
	m.args = args
	c.start(bin, m)
}

// WaitHealthy waits until every running member answers its health check.
func (c *Cluster) WaitHealthy(within time.Duration) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for _, m := range c.members {
		for {
			out, err := health(ctx, m.Client)
			if err == nil && strings.Contains(out, `"health":"true"`) {
				break
			}
			if ctx.Err() != nil {
				log, _ := os.ReadFile(m.log)
				c.t.Fatalf("etcd %s not healthy within %s: %s\n%s", m.Name, within, out, tail(log))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func (c *Cluster) stop() {
	for _, m := range c.members {
		select {
		case <-m.done:
		default:
			_ = m.cmd.Process.Kill()
			<-m.done
		}
	}
}

// health is a member's /health answer.
func health(ctx context.Context, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
