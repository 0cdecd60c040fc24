package set

import "sync"

// runners run the sub-requests of batches on goroutines that outlive one
// batch: a sub-request's handler chain (logging, metrics, mux, auth, the
// open path) needs a deeper stack than a new goroutine has, so a fresh
// goroutine per sub-request pays for growing its stack every time. An idle
// runner takes a sub-request at once; when none is idle, the sub-request
// gets a goroutine of its own (its batch waits for it either way). The
// Server owns the runners: Close stops them.
type runners struct {
	work chan func()
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// batchRunners is how many runners a server keeps.
const batchRunners = 128

func newRunners(n int) *runners {
	p := &runners{work: make(chan func()), stop: make(chan struct{})}
	p.wg.Add(n)
	for range n {
		go p.loop()
	}
	return p
}

func (p *runners) loop() {
	defer p.wg.Done()
	for {
		select {
		case f := <-p.work:
			f()
		case <-p.stop:
			return
		}
	}
}

// run runs f on an idle runner, or on a goroutine of its own.
func (p *runners) run(f func()) {
	select {
	case p.work <- f:
	default:
		go f()
	}
}

// close stops the runners once the sub-requests they run are done.
func (p *runners) close() {
	p.once.Do(func() { close(p.stop) })
	p.wg.Wait()
}
