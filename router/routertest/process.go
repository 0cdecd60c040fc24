package routertest

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one child process and how to start it again.
type proc struct {
	kind, name string
	bin        string
	args       []string
	ready      string // address whose /readyz must answer 200; "" for none
	log        string
	cmd        *exec.Cmd
	done       chan struct{}
}

func (c *Cluster) add(p *proc) {
	p.log = filepath.Join(c.dir, p.kind+"-"+p.name+".log")
	c.mu.Lock()
	c.procs[p.kind+"/"+p.name] = p
	c.mu.Unlock()
}

// list returns the processes, servers first and the router last.
func (c *Cluster) list() []*proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := make([]*proc, 0, len(c.procs))
	for _, p := range c.procs {
		ps = append(ps, p)
	}
	order := map[string]int{Server: 0, Settler: 1, Router: 2}
	slices.SortFunc(ps, func(a, b *proc) int {
		if d := order[a.kind] - order[b.kind]; d != 0 {
			return d
		}
		return strings.Compare(a.name, b.name)
	})
	return ps
}

func (c *Cluster) proc(kind, name string) (*proc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[kind+"/"+name]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("routertest: no %s named %q", kind, name)
}

// launch starts p in its own process group, appending to its log.
func (c *Cluster) launch(p *proc) error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s start: %s %s\n", time.Now().Format(time.RFC3339Nano), filepath.Base(p.bin), strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("routertest: start %s %s: %w", p.kind, p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		fmt.Fprintf(f, "=== %s exit: %v\n", time.Now().Format(time.RFC3339Nano), cmd.ProcessState)
		f.Close()
		close(done)
	}()
	c.mu.Lock()
	p.cmd, p.done = cmd, done
	c.mu.Unlock()
	return nil
}

// childEnv is the environment without HB_ variables, which the processes
// would read as configuration overrides.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HB_") {
			env = append(env, kv)
		}
	}
	return env
}

// waitReady waits until p answers /readyz (if it serves HTTP) and checks it
// has not exited.
func (c *Cluster) waitReady(p *proc) error {
	c.mu.Lock()
	done := p.done
	c.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-done:
			return fmt.Errorf("routertest: %s %s exited while starting:\n%s", p.kind, p.name, tail(p.log, 30))
		default:
		}
		if p.ready == "" {
			return nil
		}
		if resp, err := hc.Get("http://" + p.ready + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("routertest: %s %s not ready on %s after 30s:\n%s", p.kind, p.name, p.ready, tail(p.log, 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL to p's process group and waits until it is gone.
func (c *Cluster) kill(p *proc) error {
	c.mu.Lock()
	cmd, done := p.cmd, p.done
	c.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("routertest: %s %s survived SIGKILL", p.kind, p.name)
	}
}

// Kill kills a process with SIGKILL (kill -9) and waits until it is gone:
// kind is Server, Settler or Router. Problems fail the test; it is safe to
// call from any goroutine.
func (c *Cluster) Kill(kind, name string) {
	p, err := c.proc(kind, name)
	if err == nil {
		err = c.kill(p)
	}
	if err != nil {
		c.t.Error(err)
	}
}

// Restart starts a process again with its original arguments (killing it
// first if it still runs) and waits until it is ready. Problems fail the
// test; it is safe to call from any goroutine, but not for one process
// from two goroutines at once.
func (c *Cluster) Restart(kind, name string) {
	p, err := c.proc(kind, name)
	if err == nil {
		err = c.kill(p)
	}
	if err == nil {
		err = c.launch(p)
	}
	if err == nil {
		err = c.waitReady(p)
	}
	if err != nil {
		c.t.Error(err)
	}
}

// stop kills every process, closes the pools and, if the test failed,
// prints the end of every log.
func (c *Cluster) stop() {
	var wg sync.WaitGroup
	for _, p := range c.list() {
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.kill(p) }()
	}
	wg.Wait()
	if c.t.Failed() {
		for _, p := range c.list() {
			c.t.Logf("---- %s %s: last lines of %s\n%s", p.kind, p.name, p.log, tail(p.log, 40))
		}
	}
	for _, db := range c.dbs {
		db.Close()
	}
	if c.wallet != nil {
		c.wallet.Close()
	}
	if c.Client != nil {
		c.Client.http.CloseIdleConnections()
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
