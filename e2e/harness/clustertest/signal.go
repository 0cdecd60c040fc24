package clustertest

import (
	"fmt"
	"syscall"
	"time"
)

// Signal sends sig to p (not its group), e.g. SIGTERM for a graceful stop.
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("clustertest: %s %s not started", p.Kind, p.Name)
	}
	return cmd.Process.Signal(sig)
}

// Wait waits until p exits, at most within. A process still running then
// gets SIGQUIT, so the Go runtime writes every goroutine's stack into its
// log: a hung shutdown names where it hangs.
func (p *Process) Wait(within time.Duration) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-time.After(within):
	}
	_ = p.Signal(syscall.SIGQUIT)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	return fmt.Errorf("clustertest: %s %s still runs after %v (goroutines dumped into %s)", p.Kind, p.Name, within, p.Log)
}
