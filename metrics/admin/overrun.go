package admin

import (
	"bytes"
	"runtime/pprof"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Overrun bounds a process's shutdown. A process asked to stop must stop:
// an init system kills it after its own timeout anyway, and then nobody
// learns where it hung. Armed when the stop signal arrives, it logs every
// goroutine's stack and calls Exit(1) unless Disarm is called first
// (deferred at the top of run, so it runs once everything is closed).
type Overrun struct {
	// Exit ends the process: the binary's main passes os.Exit (a library
	// never exits the process itself); nil only logs.
	Exit func(code int)

	mu    sync.Mutex
	timer *time.Timer
}

// Arm starts the countdown of d. Arming again restarts it.
func (o *Overrun) Arm(d time.Duration, log *zap.Logger) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.timer != nil {
		o.timer.Stop()
	}
	o.timer = time.AfterFunc(d, func() {
		var stacks bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&stacks, 2) // into a buffer: cannot fail
		log.Error("shutdown overran: exiting", zap.Duration("limit", d), zap.String("goroutines", stacks.String()))
		_ = log.Sync()
		if o.Exit != nil {
			o.Exit(1)
		}
	})
}

// Disarm stops the countdown: the process stopped in time.
func (o *Overrun) Disarm() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.timer != nil {
		o.timer.Stop()
	}
}
