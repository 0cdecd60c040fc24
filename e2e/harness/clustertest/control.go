package clustertest

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// The cluster's processes: listing, kill -9, restart and the stop at the
// end of the test.

func (c *Cluster) add(p *Process) {
	p.Log = filepath.Join(c.dir, p.Kind+"-"+p.Name+".log")
	c.mu.Lock()
	c.procs[p.Kind+"/"+p.Name] = p
	c.mu.Unlock()
}

// ClockName is the name Options.ClockOffsets knows a process by: its
// kind and name ("server-a1", "settler-a"), the router's kind alone.
func ClockName(kind, name string) string {
	if kind == Router {
		return Router
	}
	return kind + "-" + name
}

// skewed is args with the -clock-offset Options.ClockOffsets gives the
// process, if any.
func (c *Cluster) skewed(kind, name string, args ...string) []string {
	return withOffset(args, c.opts.ClockOffsets[ClockName(kind, name)])
}

// withOffset is args with -clock-offset offset in place of any it had
// (none for 0).
func withOffset(args []string, offset time.Duration) []string {
	if i := slices.Index(args, "-clock-offset"); i >= 0 {
		args = slices.Delete(slices.Clone(args), i, i+2)
	}
	if offset != 0 {
		args = append(args, "-clock-offset", offset.String())
	}
	return args
}

// Skew restarts a process (kind Server, Settler or Router) with its wall
// clock off by offset (0: the host's), and waits until it is ready: a
// host whose clock jumps, or is set right. Problems fail the test; not for
// one process from two goroutines at once.
func (c *Cluster) Skew(kind, name string, offset time.Duration) {
	c.apply(kind, name, func(p *Process) error {
		p.Args = withOffset(p.Args, offset)
		return p.Restart()
	})
}

// Processes returns the cluster's processes, servers first and the router
// last: their Admin addresses serve /metrics, /livez, /readyz and pprof.
func (c *Cluster) Processes() []*Process { return c.list() }

// list returns the processes, servers first and the router last.
func (c *Cluster) list() []*Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := make([]*Process, 0, len(c.procs))
	for _, p := range c.procs {
		ps = append(ps, p)
	}
	order := map[string]int{Server: 0, Settler: 1, Router: 2}
	slices.SortFunc(ps, func(a, b *Process) int {
		if d := order[a.Kind] - order[b.Kind]; d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	return ps
}

func (c *Cluster) proc(kind, name string) (*Process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[kind+"/"+name]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("clustertest: no %s named %q", kind, name)
}

// Kill kills a process with SIGKILL (kill -9) and waits until it is gone:
// kind is Server, Settler or Router. Problems fail the test; it is safe to
// call from any goroutine.
func (c *Cluster) Kill(kind, name string) { c.apply(kind, name, (*Process).Kill) }

// Restart starts a process again with its original arguments (killing it
// first if it still runs) and waits until it is ready. Problems fail the
// test; it is safe to call from any goroutine, but not for one process
// from two goroutines at once.
func (c *Cluster) Restart(kind, name string) { c.apply(kind, name, (*Process).Restart) }

// apply calls do on the process, failing the test on a problem.
func (c *Cluster) apply(kind, name string, do func(*Process) error) {
	p, err := c.proc(kind, name)
	if err == nil {
		err = do(p)
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
		wg.Go(func() { _ = p.Kill() })
	}
	wg.Wait()
	if c.t.Failed() {
		for _, p := range c.list() {
			p.logTail(c.t)
		}
	}
	for _, db := range c.dbs {
		db.DB().Close()
	}
	if c.wallet != nil {
		c.wallet.Close()
	}
	if c.meta != nil {
		c.meta.Close()
	}
	if c.Client != nil {
		c.Client.http.CloseIdleConnections()
	}
}
