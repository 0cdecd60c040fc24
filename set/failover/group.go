package failover

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// SetGroup is SET name's replicated MariaDB as the meta database names it
// now, publishing a failover there: what hbctl set failover, rejoin and
// the watchdog act on.
func SetGroup(ctx context.Context, meta *sql.DB, name string) (*Group, error) {
	t, err := topology.Load(ctx, meta)
	if err != nil {
		return nil, err
	}
	s, ok := t.Set(name)
	if !ok {
		return nil, UsageError{fmt.Sprintf("no SET named %q", name)}
	}
	if len(s.Replicas) == 0 {
		return nil, fmt.Errorf("SET %s has no replicas (sets[].replicas, hbctl set add --replicas)", s.Name)
	}
	return &Group{name: "SET " + s.Name, primary: s.MySQLDSN, replicas: s.Replicas, rejoinCmd: "hbctl set rejoin " + s.Name,
		apps: accounts(s.MySQLDSN),
		publish: func(ctx context.Context, primary string, replicas []string) (string, error) {
			v, err := topology.Failover(ctx, meta, s.Name, s.MySQLDSN, primary, replicas)
			if errors.Is(err, topology.ErrPublished) {
				return "", fmt.Errorf("%w (the promoted %s is writable but unknown to servers: hbctl set rejoin %s makes it a replica of the published primary)",
					err, sqldb.Addr(primary), s.Name)
			}
			if err != nil {
				return "", fmt.Errorf("%w (the promoted %s is writable: running failover again publishes it)", err, sqldb.Addr(primary))
			}
			return fmt.Sprintf("at topology version %d; servers and settlers follow within a second", v), nil
		},
		record: func(ctx context.Context, to string) error {
			return topology.RecordPromotion(ctx, meta, s.Name, s.MySQLDSN, to)
		},
		promoted: func(ctx context.Context) (string, bool, error) {
			return topology.Promotion(ctx, meta, s.Name, s.MySQLDSN)
		}}, nil
}

// Group is a replicated MariaDB that failover and rejoin act on: a SET's
// database, or the core group of the meta and wallet databases.
type Group struct {
	name      string   // for messages: "SET b", "the core group"
	primary   string   // DSN of its primary
	replicas  []string // DSNs of its replicas
	rejoinCmd string   // the command that rejoins the old primary
	// apps are the application's account names: a fence locks them on the
	// old primary, a promotion and a rejoin unlock them.
	apps []string
	// stamp, when set, runs on the promoted replica (of DSN dsn) before
	// it turns writable: the core group's failover epoch.
	stamp func(ctx context.Context, db *sql.DB, dsn string) error
	// publish makes the promoted primary known (the old primary among
	// the replicas) and says how processes follow it.
	publish func(ctx context.Context, primary string, replicas []string) (string, error)
	// record, when set, records in the meta database that this failover
	// (from primary) promotes the replica of DSN to, before it does;
	// promoted returns the replica a failover from primary promoted and
	// did not publish (see topology.RecordPromotion). The core group has
	// neither: its publish is the stamp, part of the promotion.
	record   func(ctx context.Context, to string) error
	promoted func(ctx context.Context) (to string, ok bool, err error)
}

// Name names the group in messages: "SET b", "the core group".
func (g *Group) Name() string { return g.name }

// Primary is the DSN of the group's primary.
func (g *Group) Primary() string { return g.primary }

// Replicas are the DSNs of the group's replicas.
func (g *Group) Replicas() []string { return slices.Clone(g.replicas) }
