package settings

import (
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"go.uber.org/zap"
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
