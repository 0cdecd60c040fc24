package move

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/migrate"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// Fleet opens each SET's databases once and closes them together. Its
// pools are switchable (sqldb.Switch) and follow the SET's primary as the
// topology names it (Follow, Watch): after a failover of a SET during an
// apply, the mover's statements go to the promoted primary, and those in
// flight on the old one fail at once (a freeze's commit on a fenced or
// paused old primary would otherwise wait for ever).
type Fleet struct {
	mu       sync.Mutex
	sides    map[string]*fleetSide
	switches atomic.Int64 // pools pointed at another server so far
}

// Switches counts the pools pointed at another server so far: a move that
// failed while it changed failed because of a failover.
func (f *Fleet) Switches() int64 { return f.switches.Load() }

// fleetSide is one SET's pools: live, and cold when its archive is
// elsewhere (nil: the live pool serves both).
type fleetSide struct {
	live, cold *sqldb.Switch
}

func (fs *fleetSide) side() migrate.Side {
	side := migrate.Side{Live: fs.live.DB(), Cold: fs.live.DB()}
	if fs.cold != nil {
		side.Cold = fs.cold.DB()
	}
	return side
}

// follow points fs's pools at s's DSNs, counting the switches in n.
func (fs *fleetSide) follow(s *topology.Set, n *atomic.Int64) error {
	if err := switchTo(fs.live, s.MySQLDSN, n); err != nil {
		return fmt.Errorf("SET %s: %w", s.Name, err)
	}
	if fs.cold != nil {
		if err := switchTo(fs.cold, s.Cold(), n); err != nil {
			return fmt.Errorf("SET %s archive: %w", s.Name, err)
		}
	}
	return nil
}

// switchTo points sw at dsn, counting the switch in n first: the switch
// cuts the statements in flight on the old server, and a move that fails
// on one must see the count changed when it looks (TestMoveFollowsFailover
// saw a commit's error before a count made after the switch).
func switchTo(sw *sqldb.Switch, dsn string, n *atomic.Int64) error {
	if sw.DSN() == dsn {
		return nil
	}
	n.Add(1)
	_, err := sw.To(dsn)
	return err
}

// Side returns the live and cold pools of SET s, pointed at the DSNs s
// names.
func (f *Fleet) Side(s *topology.Set) (migrate.Side, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fs, ok := f.sides[s.Name]; ok {
		return fs.side(), fs.follow(s, &f.switches)
	}
	live, err := sqldb.OpenSwitch(s.MySQLDSN, 16)
	if err != nil {
		return migrate.Side{}, fmt.Errorf("SET %s: %w", s.Name, err)
	}
	fs := &fleetSide{live: live}
	if s.Cold() != s.MySQLDSN {
		if fs.cold, err = sqldb.OpenSwitch(s.Cold(), 8); err != nil {
			live.DB().Close()
			return migrate.Side{}, fmt.Errorf("SET %s archive: %w", s.Name, err)
		}
	}
	if f.sides == nil {
		f.sides = map[string]*fleetSide{}
	}
	f.sides[s.Name] = fs
	return fs.side(), nil
}

// Follow points the pools of every SET of m already opened at the DSNs m
// names.
func (f *Fleet) Follow(m *topology.Map) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for i := range m.Sets {
		if fs, ok := f.sides[m.Sets[i].Name]; ok {
			errs = append(errs, fs.follow(&m.Sets[i], &f.switches))
		}
	}
	return errors.Join(errs...)
}

// Watch follows the topology in meta (each new version, polled every
// half second) until ctx ends or stop is called; stop ends the following
// and waits for it.
func (f *Fleet) Watch(ctx context.Context, meta *sql.DB, log *zap.Logger) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := topology.NewWatcher(ctx, meta, 500*time.Millisecond, log)
	if err != nil {
		cancel()
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	wg.Go(func() {
		w.Follow(ctx, func(m *topology.Map) {
			if err := f.Follow(m); err != nil {
				log.Error("move: cannot follow a SET's MySQL", zap.Error(err))
			}
		})
	})
	return func() { cancel(); wg.Wait() }, nil
}

// Close closes every pool opened.
func (f *Fleet) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fs := range f.sides {
		fs.live.DB().Close()
		if fs.cold != nil {
			fs.cold.DB().Close()
		}
	}
	f.sides = nil
}

// Loads reads every bucket's load from the SET that owns it.
func (f *Fleet) Loads(ctx context.Context, m *topology.Map, loc *time.Location, now time.Time) (map[hongbao.Bucket]topology.BucketLoad, error) {
	out := map[hongbao.Bucket]topology.BucketLoad{}
	for i := range m.Sets {
		s := &m.Sets[i]
		side, err := f.Side(s)
		if err != nil {
			return nil, err
		}
		us, err := migrate.Usages(ctx, side.Live, loc, now)
		if err != nil {
			return nil, fmt.Errorf("SET %s: %w", s.Name, err)
		}
		for _, b := range m.Buckets(s.Name) {
			u := us[b]
			out[b] = topology.BucketLoad{Packets: u.Packets, Rows: u.Rows, Recent: u.Recent}
		}
	}
	return out, nil
}
