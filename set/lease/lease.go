// Package lease gives one actor at a time the right to act on a replicated
// group or a bucket: a failover of SET b, a rejoin of the core group, a
// move of bucket 17. The right is a key in etcd bound to an etcd lease, the
// way Patroni holds its leader key and Vitess its shard lock: the key
// exists only while its holder keeps the lease alive, and it vanishes by
// itself when the holder dies, hangs or is cut off from the etcd quorum
// for longer than the TTL.
//
// Why etcd and not a lock in MySQL: a GET_LOCK or a row in the meta
// database dies with the database it guards, and the group being failed
// over is exactly the database that is failing. etcd is a consensus store
// of its own (three members: one may be lost), so the lock outlives any
// one host, and a holder on the minority side of a partition loses its
// lease instead of going on next to a new holder.
//
// A lease is not a fence by itself: a holder paused for longer than the
// TTL (a GC pause, SIGSTOP, a frozen VM) can wake up believing it still
// holds it. So every destructive step first calls Held.Check, which asks
// the etcd quorum (a linearizable transaction comparing the key's value
// and lease) whether this holder's key is still the one there, and stops
// with ErrLost otherwise. What remains is the window between a Check and
// the step it guards; steps are short, the TTL is many times longer, and
// a holder whose keep-alive stalls stops at its next Check.
package lease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrBusy is returned by TryAcquire when another holder has the key.
var ErrBusy = errors.New("lease: held by another actor")

// ErrUnreachable is returned when etcd did not answer a call within the
// client's CallTimeout: its quorum is down or cut off from this host.
var ErrUnreachable = errors.New("lease: etcd unreachable")

// ErrLost is returned by Check when this holder's key is gone or belongs
// to someone else now: stop acting.
var ErrLost = errors.New("lease: lost")

// Prefix is where hongbao's keys live in etcd.
const Prefix = "/hongbao/lease/"

// Options configure a Client.
type Options struct {
	// TTL is how long a key outlives its holder's last keep-alive; it is
	// rounded up to whole seconds, etcd's unit. Default 10 s.
	TTL time.Duration
	// DialTimeout bounds connecting to etcd. Default 5 s.
	DialTimeout time.Duration
	// CallTimeout bounds each call to etcd (grant, take, check, release).
	// Without it a call waits for etcd forever: an operator's hbctl
	// with the quorum down hung instead of saying so. Default 15 s: a
	// quorum electing a new leader under load took over 5 s to answer a
	// grant.
	CallTimeout time.Duration
	// Log receives acquisitions, losses and releases. Default: none.
	Log *zap.Logger
}

// Client takes leases from one etcd cluster.
type Client struct {
	cli  *clientv3.Client
	ttl  int64
	call time.Duration
	log  *zap.Logger
}

// Dial connects to the etcd cluster at endpoints (host:port or URLs).
func Dial(ctx context.Context, endpoints []string, o Options) (*Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("lease: no etcd endpoints")
	}
	if o.TTL <= 0 {
		o.TTL = 10 * time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 15 * time.Second
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          o.DialTimeout,
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Context:              ctx,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("lease: etcd %s: %w", strings.Join(endpoints, ","), err)
	}
	ttl := int64((o.TTL + time.Second - 1) / time.Second)
	return &Client{cli: cli, ttl: ttl, call: o.CallTimeout, log: o.Log}, nil
}

// bounded is ctx limited to one call's time; its error is ErrUnreachable
// when that time ran out (and ctx itself had not ended).
func (c *Client) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, c.call, fmt.Errorf("%w: no answer in %v", ErrUnreachable, c.call))
}

// cause is err, or the reason ctx ended when it did (ErrUnreachable for
// a call that ran out of time).
func cause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && ctx.Err() != nil {
		return c
	}
	return err
}

// Close closes the connection; held leases expire after their TTL unless
// released first.
func (c *Client) Close() error { return c.cli.Close() }

// Held is one holder's key. Check before every destructive step; Release
// when done.
type Held struct {
	c      *Client
	key    string
	holder string
	id     clientv3.LeaseID
	cancel context.CancelFunc
	lost   chan struct{}
}

// TryAcquire takes the key of name for holder (who: host and process, for
// the messages of anyone refused) or answers ErrBusy, naming the current
// holder, at once.
func (c *Client) TryAcquire(ctx context.Context, name, holder string) (*Held, error) {
	key := Prefix + name
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	grant, err := c.cli.Grant(ctx, c.ttl)
	if err != nil {
		return nil, fmt.Errorf("lease: grant for %s: %w", name, cause(ctx, err))
	}
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, holder, clientv3.WithLease(grant.ID))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		c.revoke(grant.ID)
		return nil, fmt.Errorf("lease: take %s: %w", name, cause(ctx, err))
	}
	if !resp.Succeeded {
		c.revoke(grant.ID)
		who := "?"
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			who = string(kvs[0].Value)
		}
		return nil, fmt.Errorf("%w: %s by %s", ErrBusy, name, who)
	}
	return c.keep(name, key, holder, grant.ID)
}

// Acquire waits until it takes the key of name for holder, or ctx ends.
func (c *Client) Acquire(ctx context.Context, name, holder string) (*Held, error) {
	for {
		h, err := c.TryAcquire(ctx, name, holder)
		if !errors.Is(err, ErrBusy) {
			return h, err
		}
		if err := c.waitGone(ctx, Prefix+name); err != nil {
			return nil, fmt.Errorf("lease: wait for %s: %w", name, err)
		}
	}
}

// waitGone returns once key does not exist (released or expired), or ctx
// ends. It watches from the revision it read the key at, so a deletion
// between the read and the watch is not missed.
func (c *Client) waitGone(ctx context.Context, key string) error {
	gctx, cancel := c.bounded(ctx)
	resp, err := c.cli.Get(gctx, key)
	err = cause(gctx, err)
	cancel()
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := range c.cli.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1)) {
		if err := w.Err(); err != nil {
			return err
		}
		for _, ev := range w.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return nil
			}
		}
	}
	return ctx.Err()
}

// keep starts the keep-alive of a key just taken; its goroutine is owned
// by the Held and ends with Release or the lease's loss.
func (c *Client) keep(name, key, holder string, id clientv3.LeaseID) (*Held, error) {
	kctx, cancel := context.WithCancel(context.Background())
	ch, err := c.cli.KeepAlive(kctx, id)
	if err != nil {
		cancel()
		c.revoke(id)
		return nil, fmt.Errorf("lease: keep %s alive: %w", name, err)
	}
	h := &Held{c: c, key: key, holder: holder, id: id, cancel: cancel, lost: make(chan struct{})}
	go func() {
		for range ch { // drained until the lease expires or Release cancels
		}
		close(h.lost)
	}()
	c.log.Info("lease taken", zap.String("lease", name), zap.String("holder", holder), zap.Int64("ttl_s", c.ttl))
	return h, nil
}

// Lost is closed when the keep-alive ends: the lease expired, etcd could
// not be reached for its TTL, or Release was called.
func (h *Held) Lost() <-chan struct{} { return h.lost }

// Check asks the etcd quorum whether this holder's key is still there and
// still bound to this holder's lease; ErrLost otherwise. Call it before
// every destructive step.
func (h *Held) Check(ctx context.Context) error {
	select {
	case <-h.lost:
		return fmt.Errorf("%w: %s: keep-alive ended", ErrLost, h.key)
	default:
	}
	ctx, cancel := h.c.bounded(ctx)
	defer cancel()
	resp, err := h.c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(h.key), "=", h.holder),
			clientv3.Compare(clientv3.LeaseValue(h.key), "=", h.id)).
		// A transaction of comparisons alone counts as serializable and
		// is answered by whichever member the client talks to, from its
		// own state: a lagging follower, or the last member of a lost
		// quorum. A linearizable read in it makes etcd confirm with the
		// quorum first.
		Then(clientv3.OpGet(h.key)).
		Commit()
	if err != nil {
		return fmt.Errorf("%w: %s: cannot ask etcd: %w", ErrLost, h.key, cause(ctx, err))
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %s is no longer %s's", ErrLost, h.key, h.holder)
	}
	return nil
}

// Release gives the key up at once (revoking its lease) and stops the
// keep-alive. A release that cannot reach etcd leaves the key to expire.
func (h *Held) Release(ctx context.Context) error {
	h.cancel()
	ctx, cancel := h.c.bounded(ctx)
	defer cancel()
	_, err := h.c.cli.Revoke(ctx, h.id)
	err = cause(ctx, err)
	<-h.lost
	if err != nil {
		return fmt.Errorf("lease: release %s (it expires by itself): %w", h.key, err)
	}
	h.c.log.Info("lease released", zap.String("lease", strings.TrimPrefix(h.key, Prefix)), zap.String("holder", h.holder))
	return nil
}

// Drop is Release within 2 s, for a release nothing depends on (a
// deferred one): a lease it cannot release expires after its TTL.
func (h *Held) Drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = h.Release(ctx) // its error says only that the lease expires by itself
}

// revoke gives up a lease not bound to a key we hold, best effort: it
// expires after its TTL anyway.
func (c *Client) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := c.cli.Revoke(ctx, id); err != nil {
		c.log.Warn("lease: revoke of an unused lease failed; it expires by itself", zap.Error(err))
	}
}

// Open dials the etcd cluster of cfg; with no endpoints configured it
// returns nil (no etcd: callers guard with their MySQL locks alone).
func Open(ctx context.Context, cfg configs.Etcd, log *zap.Logger) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, nil
	}
	return Dial(ctx, cfg.Endpoints, Options{TTL: cfg.TTL.D(), Log: log})
}

// Revoke ends at once the lease that holds name's key, whoever holds it:
// the holder's next Check answers ErrLost. For an operator who knows the
// holder is gone and will not wait for its TTL, and for tests. It
// reports whether a key was there.
func (c *Client) Revoke(ctx context.Context, name string) (bool, error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	resp, err := c.cli.Get(ctx, Prefix+name)
	if err != nil {
		return false, fmt.Errorf("lease: read %s: %w", name, cause(ctx, err))
	}
	if len(resp.Kvs) == 0 {
		return false, nil
	}
	if _, err := c.cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		return false, fmt.Errorf("lease: revoke %s: %w", name, cause(ctx, err))
	}
	return true, nil
}

// Holder names this process for the actors a lease refuses: program, pid
// and host.
func Holder() string {
	host, err := os.Hostname()
	if err != nil {
		host = "?"
	}
	return fmt.Sprintf("%s pid %d on %s", filepath.Base(os.Args[0]), os.Getpid(), host)
}
