package router

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// Rate is a token bucket: a user may make Burst requests at once, and one
// more every Every after that. The zero Rate is no limit.
type Rate struct {
	Every time.Duration
	Burst int
}

// Limits are the router's abuse limits. Each router counts on its own: with
// n routers behind a load balancer a user gets up to n times the rate.
type Limits struct {
	Open, Grab, Send Rate
	// MaxPerAddress caps the requests of one client address in flight at
	// once (0: no cap).
	MaxPerAddress int
	// MaxUsers bounds the users each rate limiter tracks (0: defaultMaxUsers).
	MaxUsers int
}

// ErrRateLimited answers a user going faster than the route's rate.
var ErrRateLimited = &hongbao.Error{Code: "rate_limited", Message: "too many requests: slow down"}

// defaultMaxUsers bounds the users a limiter tracks, about 40 bytes each.
const defaultMaxUsers = 1 << 18

// limiterShards spreads users over locks, so one busy user does not hold
// up the rest.
const limiterShards = 64

// limiter is a per-user token bucket in its GCRA form: per user only the
// time at which the bucket will be full again (tat). A user whose tat has
// passed has a full bucket, exactly as a user never seen, so forgetting
// them changes nothing: shards drop such users whenever they fill up,
// without a goroutine. If a shard is full of users still being limited it
// forgets some of them anyway (they get a fresh burst): memory stays
// bounded whatever the number of users.
type limiter struct {
	every     int64 // ns between tokens
	tolerance int64 // ns of burst: every * (burst-1)
	perShard  int
	shards    [limiterShards]limShard
}

type limShard struct {
	mu  sync.Mutex
	tat map[hongbao.UserID]int64 // Unix ns when the user's bucket is full again
}

// newLimiter returns a limiter for rate, or nil for no limit.
func newLimiter(rate Rate, maxUsers int) *limiter {
	if rate.Every <= 0 || rate.Burst <= 0 {
		return nil
	}
	if maxUsers <= 0 {
		maxUsers = defaultMaxUsers
	}
	l := &limiter{every: int64(rate.Every), tolerance: int64(rate.Every) * int64(rate.Burst-1),
		perShard: max(1, maxUsers/limiterShards)}
	for i := range l.shards {
		l.shards[i].tat = map[hongbao.UserID]int64{}
	}
	return l
}

// allow takes a token from user's bucket at now, or says how long until
// there is one. A nil limiter allows everything.
func (l *limiter) allow(user hongbao.UserID, now time.Time) (time.Duration, bool) {
	if l == nil {
		return 0, true
	}
	sh := &l.shards[uint64(user)%limiterShards]
	t := now.UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	tat, known := sh.tat[user]
	tat = max(tat, t)
	if wait := tat - t - l.tolerance; wait > 0 {
		return time.Duration(wait), false
	}
	if !known && len(sh.tat) >= l.perShard {
		sh.evict(t, l.perShard)
	}
	sh.tat[user] = tat + l.every
	return 0, true
}

// evict drops the users whose bucket is full again, then, if the shard is
// still over three quarters of its bound, arbitrary others (so a shard of
// users all being limited is not swept at every new user).
func (sh *limShard) evict(now int64, bound int) {
	for u, tat := range sh.tat {
		if tat <= now {
			delete(sh.tat, u)
		}
	}
	for u := range sh.tat {
		if len(sh.tat) <= bound*3/4 {
			break
		}
		delete(sh.tat, u)
	}
}

// size is how many users the limiter tracks.
func (l *limiter) size() int {
	if l == nil {
		return 0
	}
	n := 0
	for i := range l.shards {
		l.shards[i].mu.Lock()
		n += len(l.shards[i].tat)
		l.shards[i].mu.Unlock()
	}
	return n
}

// limited refuses a request of user over the limiter's rate with 429 and
// the wait in Retry-After, before h does any work.
func (rt *Router) limited(l *limiter, h handler) handler {
	return func(w http.ResponseWriter, r *http.Request, user hongbao.UserID) error {
		if wait, ok := l.allow(user, rt.now()); !ok {
			return &api.RetryError{Err: fmt.Errorf("user %s: %w", user, ErrRateLimited), After: wait}
		}
		return h(w, r, user)
	}
}
