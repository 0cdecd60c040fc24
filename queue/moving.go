package queue

import (
	"errors"
	"sync"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// A bucket moving to another SET is frozen for a moment: its fence is
// taken and every open of it fails at once with hongbao.ErrMoving (the
// store takes fences NOWAIT). The committers remember such buckets for
// movingFor, answering their jobs without a transaction meanwhile, so that
// one frozen bucket costs the transactions of the other buckets one split,
// not one per batch; the packet's worker waits the freeze out and submits
// again (movingBackoff), for up to TxTimeout, before answering busy.
const movingFor = 50 * time.Millisecond

// movingBackoff is the worker's wait before each new submission of a
// batch whose bucket is moving; the last one repeats.
var movingBackoff = []time.Duration{10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond}

// frozen remembers buckets found moving, until a moment later.
type frozen struct {
	mu    sync.Mutex
	until map[hongbao.Bucket]time.Time
}

// mark remembers b as moving for movingFor from now.
func (f *frozen) mark(b hongbao.Bucket, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.until == nil {
		f.until = map[hongbao.Bucket]time.Time{}
	}
	f.until[b] = now.Add(movingFor)
}

// has reports whether b was found moving a moment ago; it forgets buckets
// whose moment is over.
func (f *frozen) has(b hongbao.Bucket, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.until[b]
	if ok && !now.Before(t) {
		delete(f.until, b)
		return false
	}
	return ok
}

// isMoving reports whether err says a bucket is frozen by a move.
func isMoving(err error) bool { return errors.Is(err, hongbao.ErrMoving) }

// byBucket splits js into groups of one bucket each, in the order of each
// bucket's first job.
func byBucket(js []*job) [][]*job {
	var groups [][]*job
	at := map[hongbao.Bucket]int{}
	for _, j := range js {
		b := j.work.ID.Bucket()
		i, ok := at[b]
		if !ok {
			i = len(groups)
			at[b] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], j)
	}
	return groups
}
