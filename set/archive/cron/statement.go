package cron

// The daily wallet statement, for hbctl statement and the archival cron
// (hbarchive run with archive.statement_dir): it opens the wallet and
// every SET of the configuration and calls package statement.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/settings"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/statement"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// WriteStatement builds the statement of day (YYYY-MM-DD in the cluster's time
// zone) and writes it in format to the file out, atomically, or to stdout
// when out is "" or "-". When the SETs' records disagree with the ledger
// it still writes the statement (its problems listed in JSON) and returns
// statement.ErrDisagree.
func WriteStatement(ctx context.Context, cfg *configs.Config, day, format, out string, stdout io.Writer) (*statement.Statement, error) {
	from, to, err := statement.ParseDay(day, cfg.Location())
	if err != nil {
		return nil, err
	}
	w, err := wallet.Open(ctx, cfg.WalletDSN, cfg.CoreMembers(), 2, time.Now)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	recs, closeAll, err := openSets(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	money, err := statement.ReadSETs(ctx, recs, from, to, time.Duration(cfg.Limits.Expiry))
	if err != nil {
		return nil, err
	}
	snap, err := w.Snapshot(ctx) // after the SETs were read: what they delivered meanwhile is in it
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	st, err := statement.Daily(ctx, snap, recs, money, day, from, to)
	if err != nil && !errors.Is(err, statement.ErrDisagree) {
		return nil, err
	}
	var werr error
	if out == "" || out == "-" {
		werr = st.Write(stdout, format)
	} else {
		werr = st.WriteFile(out, format)
	}
	return st, errors.Join(werr, err)
}

// openSets opens every SET's store (with its archive, so archived packets
// are found) as the statement's Records.
func openSets(ctx context.Context, cfg *configs.Config) (statement.Records, func(), error) {
	sets, err := settings.Sets(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	var recs anySet
	var closers []func() error
	closeAll := func() {
		for _, c := range closers {
			_ = c() // read-only pools: nothing to lose
		}
	}
	for _, sc := range sets {
		db, err := sqldb.Open(sc.MySQLDSN, 4)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("SET %s: %w", sc.Name, err)
		}
		closers = append(closers, db.Close)
		cold := db
		if sc.Cold() != sc.MySQLDSN {
			if cold, err = sqldb.Open(sc.Cold(), 2); err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("SET %s archive: %w", sc.Name, err)
			}
			closers = append(closers, cold.Close)
		}
		recs = append(recs, store.New(db, sc.Name, cfg.Location(), time.Now, rand.Int64N).WithArchive(cold))
	}
	return recs, closeAll, nil
}

// anySet finds a packet in whichever SET holds it, and reads every SET's
// moves.
type anySet []*store.Store

func (a anySet) MoneyBetween(ctx context.Context, from, to, since time.Time) ([]hongbao.Entry, map[string]bool, []error, error) {
	var moves []hongbao.Entry
	var unreadable []error
	inFlight := map[string]bool{}
	for _, s := range a {
		m, f, u, err := s.MoneyBetween(ctx, from, to, since)
		if err != nil {
			return nil, nil, nil, err
		}
		moves, unreadable = append(moves, m...), append(unreadable, u...)
		maps.Copy(inFlight, f)
	}
	return moves, inFlight, unreadable, nil
}

func (a anySet) Packet(ctx context.Context, id hongbao.PacketID) (*hongbao.Packet, []hongbao.Record, error) {
	for _, s := range a {
		p, rs, err := s.Packet(ctx, id)
		if errors.Is(err, hongbao.ErrNotFound) {
			continue
		}
		return p, rs, err
	}
	return nil, nil, fmt.Errorf("packet %s: %w", id, hongbao.ErrNotFound)
}
