package settings

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// CoreMoves logs each move of a process's pool on the core group's db
// ("meta" or "wallet") to another member after a failover, and each move
// that failed (tried again half a second later): without it, an operator
// could not tell from a process's log which primary it writes to.
func CoreMoves(log *zap.Logger, db string) sqldb.GroupOption {
	return sqldb.OnMove(func(member string, epoch int64, err error) {
		if err != nil {
			log.Error("core group: could not move to the new primary", zap.String("db", db),
				zap.String("member", member), zap.Int64("epoch", epoch), zap.Error(err))
			return
		}
		log.Warn("core group: following a new primary", zap.String("db", db),
			zap.String("member", member), zap.Int64("epoch", epoch))
	})
}

// CoreProbes returns the probes of the core group's members that every
// pool of a process on the group follows (sqldb.ProbedBy), with the meta
// database's account: one probe of each member per round for the process,
// not one per pool. Nil without a replicated core group (nothing to
// follow); the caller closes it after its pools.
func CoreProbes(c *configs.Config) (*sqldb.GroupProbes, error) {
	members := c.CoreMembers()
	if len(members) == 0 {
		return nil, nil
	}
	g, err := sqldb.NewGroupProbes(c.MetaDSN, members)
	if err != nil {
		return nil, fmt.Errorf("settings: core group probes: %w", err)
	}
	return g, nil
}
