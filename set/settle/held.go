package settle

import (
	"errors"
	"slices"
	"sync"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// maxHeld bounds the rows a settler sets aside: each is named in every
// outbox read. A SET with more has a fault no settler can work around;
// the rows past the bound are read again in every round, as all were
// before rows were set aside.
const maxHeld = 1000

// held is the outbox rows a settler set aside as undeliverable as they
// are: a ledger key already used for another entry, or an entry the
// wallet refuses (never expected in an outbox). Each stays in the outbox,
// where hbctl verify names it. Rows are read oldest first, so a row kept
// without being set aside comes back at the head of every read and takes
// the place of a credit behind it: enough of them (a read's worth) and
// the SET's credits stop. Set aside, they are left out of the reads for
// HoldFor, then tried again (an operator may have mended the ledger).
type held struct {
	mu    sync.Mutex
	since map[int64]time.Time
}

// skip returns the rows set aside less than holdFor before now, in order,
// and forgets the others.
func (h *held) skip(now time.Time, holdFor time.Duration) []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]int64, 0, len(h.since))
	for id, at := range h.since {
		if now.Sub(at) >= holdFor {
			delete(h.since, id)
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// hold sets rows ids aside from now, up to maxHeld in all, and returns how
// many are set aside.
func (h *held) hold(now time.Time, ids []int64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since == nil {
		h.since = map[int64]time.Time{}
	}
	for _, id := range ids {
		if len(h.since) >= maxHeld {
			break
		}
		h.since[id] = now
	}
	return len(h.since)
}

// refused reports whether the wallet refused an entry for what it is (a
// domain error: an overdraft, a limit), which trying again will not
// change, rather than for a fault of the moment.
func refused(err error) bool {
	var domain *hongbao.Error
	var limit *hongbao.LimitError
	return errors.As(err, &domain) || errors.As(err, &limit)
}
