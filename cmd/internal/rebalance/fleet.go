// Package rebalance is the operator's workflow of moving buckets between
// SETs: a plan from the SETs' own usage (topology.Plan), its journal in the
// meta database, and the Mover that applies it bucket by bucket with the
// live copy of store/migrate: copy while the source serves, catch up,
// freeze (the source's fence held in an open transaction), copy the last
// delta, verify, hand the fence to the target, publish the topology, and
// delete the source's copy after a grace period.
package rebalance

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/router/topology"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store/migrate"
)

// Fleet opens each SET's databases once and closes them together.
type Fleet struct {
	mu    sync.Mutex
	sides map[string]migrate.Side
	pools []*sql.DB
}

// Side returns the live and cold pools of SET s.
func (f *Fleet) Side(s *topology.Set) (migrate.Side, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if side, ok := f.sides[s.Name]; ok {
		return side, nil
	}
	live, err := schema.Open(s.MySQLDSN, 16)
	if err != nil {
		return migrate.Side{}, fmt.Errorf("SET %s: %w", s.Name, err)
	}
	f.pools = append(f.pools, live)
	side := migrate.Side{Live: live, Cold: live}
	if s.Cold() != s.MySQLDSN {
		cold, err := schema.Open(s.Cold(), 8)
		if err != nil {
			return migrate.Side{}, fmt.Errorf("SET %s archive: %w", s.Name, err)
		}
		f.pools = append(f.pools, cold)
		side.Cold = cold
	}
	if f.sides == nil {
		f.sides = map[string]migrate.Side{}
	}
	f.sides[s.Name] = side
	return side, nil
}

// Close closes every pool opened.
func (f *Fleet) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, db := range f.pools {
		db.Close()
	}
	f.pools, f.sides = nil, nil
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
