package queue

import (
	"sync"

	hongbao "github.com/hongbao-dev/hongbao"
)

// waiting holds the batches waiting for a committer, oldest first.
type waiting struct {
	mu     sync.Mutex
	jobs   []*job
	ready  chan struct{} // a token while jobs may be waiting; never closed
	done   chan struct{} // closed by close
	closed bool
}

func newWaiting() *waiting { return &waiting{ready: make(chan struct{}, 1), done: make(chan struct{})} }

// put adds j at the back. Jobs put after close are still handed out to
// committers that have not returned.
func (w *waiting) put(j *job) {
	w.mu.Lock()
	w.jobs = append(w.jobs, j)
	w.mu.Unlock()
	w.wake()
}

func (w *waiting) wake() {
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// close lets take return false once nothing waits. It is called once.
func (w *waiting) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	close(w.done)
}

// take waits for jobs and removes a transaction's worth: the oldest job,
// then whole buckets in the order of their oldest job, up to merge packets
// and until batch opens are reached (the job that reaches it is still
// taken). Packets of one bucket share their day tables, and MySQL's cost
// is mostly per statement: a transaction that writes several packets of a
// table with one statement is cheaper than one that writes as many
// packets of as many tables. The oldest job always goes first, so a job
// waits at most for the transactions of the jobs older than itself (which
// may carry younger jobs of their buckets). take returns false when closed
// and empty.
func (w *waiting) take(merge, batch int) ([]*job, bool) {
	for {
		w.mu.Lock()
		if len(w.jobs) > 0 {
			js := w.pick(merge, batch)
			left := len(w.jobs) > 0
			w.mu.Unlock()
			if left {
				w.wake() // another committer may take the rest
			}
			return js, true
		}
		closed := w.closed
		w.mu.Unlock()
		if closed {
			return nil, false
		}
		select {
		case <-w.ready:
		case <-w.done:
		}
	}
}

// pick removes and returns the jobs take describes; w.mu is held.
func (w *waiting) pick(merge, batch int) []*job {
	byBucket := map[hongbao.Bucket][]int{}
	for i, j := range w.jobs {
		b := j.work.ID.Bucket()
		byBucket[b] = append(byBucket[b], i)
	}
	taken := make([]bool, len(w.jobs))
	var js []*job
	opens := 0
fill:
	for i, j := range w.jobs {
		if taken[i] {
			continue
		}
		for _, k := range byBucket[j.work.ID.Bucket()] {
			if len(js) == merge || opens >= batch {
				break fill
			}
			if taken[k] {
				continue
			}
			taken[k] = true
			js = append(js, w.jobs[k])
			opens += len(w.jobs[k].work.Users)
		}
	}
	rest := w.jobs[:0]
	for i, j := range w.jobs {
		if !taken[i] {
			rest = append(rest, j)
		}
	}
	clear(w.jobs[len(rest):]) // let the taken jobs be collected
	w.jobs = rest
	return js
}
