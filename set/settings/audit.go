package settings

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store/audit"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// Audit opens what a money audit of c's cluster reads (store/audit): pools
// on every SET's MySQL and archive (the meta database's list of SETs when
// there is one) and the meta database. The caller opens the wallet and sets
// Sources.Wallet. closeAll closes what was opened, even after an error.
func Audit(ctx context.Context, c *configs.Config) (src audit.Sources, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	src.Location = c.Location()
	sets, err := Sets(ctx, c)
	if err != nil {
		return src, closeAll, err
	}
	for _, sc := range sets {
		db, cold, closeDBs, err := openSetDBs(sc.MySQLDSN, sc.Cold())
		if err != nil {
			return src, closeAll, fmt.Errorf("SET %s: %w", sc.Name, err)
		}
		closers = append(closers, closeDBs)
		src.Sets = append(src.Sets, audit.Set{Name: sc.Name, DB: db, Cold: cold})
	}
	if c.MetaDSN != "" {
		if src.Meta, err = topology.OpenMeta(ctx, c.MetaDSN, c.CoreMembers(), false); err != nil {
			return src, closeAll, err
		}
		closers = append(closers, func() { src.Meta.Close() })
	}
	return src, closeAll, nil
}

// openSetDBs opens pools on a SET's MySQL and its archive (one pool when
// they are the same).
func openSetDBs(dsn, coldDSN string) (db, cold *sql.DB, closeAll func(), err error) {
	if db, err = sqldb.Open(dsn, 4); err != nil {
		return nil, nil, nil, err
	}
	if coldDSN == dsn {
		return db, db, func() { db.Close() }, nil
	}
	if cold, err = sqldb.Open(coldDSN, 2); err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return db, cold, func() { db.Close(); cold.Close() }, nil
}

// RunAudit opens what Audit opens and the wallet, runs one money audit
// and closes them. OrphansBefore, when zero, is taken now (the process's
// wall clock: packets' times are other hosts'), less the settlers' sweep
// delay (settle.sweep_after), before any snapshot opens: a packet younger
// than that is no orphan.
func RunAudit(ctx context.Context, c *configs.Config, opt audit.Options, now func() time.Time) (*audit.Report, error) {
	if opt.OrphansBefore.IsZero() {
		opt.OrphansBefore = now().Add(-c.Settle.SweepAfter.D())
	}
	src, closeAll, err := Audit(ctx, c)
	defer closeAll()
	if err != nil {
		return nil, err
	}
	w, err := wallet.Open(ctx, c.WalletDSN, c.CoreMembers(), 2, now)
	if err != nil {
		return nil, fmt.Errorf("the wallet: %w", err)
	}
	defer w.Close()
	src.Wallet = w
	return audit.Run(ctx, src, opt)
}
