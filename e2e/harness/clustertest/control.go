package clustertest

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// The cluster's processes: listing, kill -9, restart and the stop at the
// end of the test.

func (c *Cluster) add(p *Process) {
	p.Log = filepath.Join(c.dir, p.Kind+"-"+p.Name+".log")
	c.mu.Lock()
	c.procs[p.Kind+"/"+p.Name] = p
	c.mu.Unlock()
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
