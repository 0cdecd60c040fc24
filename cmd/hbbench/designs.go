package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/set"
)

// design is one way of serving opens; only "ours" is the product, the
// others are the baselines it is measured against (they live here, never
// in the server).
type design interface {
	name() string
	// prepare readies packets for opening (the Redis design pre-splits).
	prepare(ctx context.Context, ps []*hongbao.Packet) error
	open(ctx context.Context, id hongbao.PacketID, user hongbao.UserID) (int64, error)
	// drain waits for asynchronous writes to reach MySQL.
	drain(ctx context.Context) error
	close()
}

// Errors a baseline reports to its client.
var errConflict = errors.New("optimistic retries exhausted")

// ours is the product: set.Server's open path (cache fast path, the
// per-packet FIFO queue, group open, memcached CAS cap) in process. Its
// packets are created through the server's own send path, as in
// production, where the router sends a packet's send and its opens to the
// same server; cold, they are inserted by SQL like the baselines', so the
// server has never seen them (as after a failover or a restart).
type ours struct {
	srv  *set.Server
	cold bool
}

func (o *ours) name() string {
	if o.cold {
		return "queue-cold"
	}
	return "queue"
}

func (o *ours) prepare(context.Context, []*hongbao.Packet) error { return nil }

// create sends ps through the server, 16 at a time.
func (o *ours) create(ctx context.Context, ps []*hongbao.Packet) error {
	var i atomic.Int64
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			for n := i.Add(1) - 1; n < int64(len(ps)); n = i.Add(1) - 1 {
				p := ps[n]
				if _, err := o.srv.Send(ctx, p.ID, p.Sender, hongbao.SendRequest{Total: p.Total, Count: p.Count, Type: p.Type}, ""); err != nil {
					errs <- fmt.Errorf("send %s: %w", p.ID, err)
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range 16 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}
func (o *ours) drain(context.Context) error { return nil }
func (o *ours) close()                      { _ = o.srv.Close(context.Background()) }
func (o *ours) open(ctx context.Context, id hongbao.PacketID, u hongbao.UserID) (int64, error) {
	r, err := o.srv.Open(ctx, id, u)
	return r.Amount, err
}

// lockDesign is one transaction per request with SELECT ... FOR UPDATE:
// every client fights for the packet row inside InnoDB.
type lockDesign struct {
	db  *sql.DB
	loc *time.Location
}

func (l *lockDesign) name() string                                     { return "lock" }
func (l *lockDesign) prepare(context.Context, []*hongbao.Packet) error { return nil }
func (l *lockDesign) drain(context.Context) error                      { return nil }
func (l *lockDesign) close()                                           {}

func (l *lockDesign) open(ctx context.Context, id hongbao.PacketID, u hongbao.UserID) (int64, error) {
	t := id.Table(l.loc)
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback() //nolint:errcheck
	var typ string
	var remAmount int64
	var remCount, count int
	err = tx.QueryRowContext(ctx, "SELECT type, remaining_amount, remaining_count, count FROM "+t.Packets()+" WHERE id = ? FOR UPDATE", id).
		Scan(&typ, &remAmount, &remCount, &count)
	if err != nil {
		return 0, err
	}
	if amount, ok, err := had(ctx, tx, t, id, u); err != nil || ok {
		return amount, err
	}
	if remCount == 0 {
		return 0, hongbao.ErrSoldOut
	}
	amount := hongbao.Draw(hongbao.Type(typ), remAmount, remCount, rand.Int64N)
	if err := write(ctx, tx, t, id, u, amount, count-remCount+1); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE "+t.Packets()+" SET remaining_amount = ?, remaining_count = ? WHERE id = ?",
		remAmount-amount, remCount-1, id); err != nil {
		return 0, err
	}
	return amount, tx.Commit()
}

// optimistic reads without locks and updates with a compare on the
// remaining amount and count, retrying a bounded number of times.
type optimistic struct {
	db      *sql.DB
	loc     *time.Location
	retries int
}

func (o *optimistic) name() string                                     { return "optimistic" }
func (o *optimistic) prepare(context.Context, []*hongbao.Packet) error { return nil }
func (o *optimistic) drain(context.Context) error                      { return nil }
func (o *optimistic) close()                                           {}

func (o *optimistic) open(ctx context.Context, id hongbao.PacketID, u hongbao.UserID) (int64, error) {
	t := id.Table(o.loc)
	for range o.retries {
		amount, done, err := o.try(ctx, t, id, u)
		if done || err != nil {
			return amount, err
		}
	}
	return 0, errConflict
}

func (o *optimistic) try(ctx context.Context, t hongbao.DayTable, id hongbao.PacketID, u hongbao.UserID) (int64, bool, error) {
	var typ string
	var remAmount int64
	var remCount, count int
	err := o.db.QueryRowContext(ctx, "SELECT type, remaining_amount, remaining_count, count FROM "+t.Packets()+" WHERE id = ?", id).
		Scan(&typ, &remAmount, &remCount, &count)
	if err != nil {
		return 0, false, err
	}
	if remCount == 0 {
		return 0, true, hongbao.ErrSoldOut
	}
	amount := hongbao.Draw(hongbao.Type(typ), remAmount, remCount, rand.Int64N)
	tx, err := o.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback() //nolint:errcheck
	res, err := tx.ExecContext(ctx, "UPDATE "+t.Packets()+" SET remaining_amount = ?, remaining_count = ? WHERE id = ? AND remaining_count = ? AND remaining_amount = ?",
		remAmount-amount, remCount-1, id, remCount, remAmount)
	if err != nil {
		return 0, false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return 0, false, nil // lost the race: retry
	}
	if a, ok, err := had(ctx, tx, t, id, u); err != nil || ok {
		return a, true, err // rolls back the decrement
	}
	if err := write(ctx, tx, t, id, u, amount, count-remCount+1); err != nil {
		return 0, false, err
	}
	return amount, true, tx.Commit()
}

// had returns the share u already holds.
func had(ctx context.Context, tx *sql.Tx, t hongbao.DayTable, id hongbao.PacketID, u hongbao.UserID) (int64, bool, error) {
	var amount int64
	err := tx.QueryRowContext(ctx, "SELECT amount FROM "+t.Details()+" WHERE packet_id = ? AND user_id = ?", id, u).Scan(&amount)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return amount, err == nil, err
}

// write inserts a share and its credit, as the product does.
func write(ctx context.Context, tx *sql.Tx, t hongbao.DayTable, id hongbao.PacketID, u hongbao.UserID, amount int64, seq int) error {
	now := time.Now().UTC()
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+t.Details()+" (packet_id, user_id, amount, seq, opened_at) VALUES (?,?,?,?,?)",
		id, u, amount, seq, now); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at, set_name) VALUES (?,?,?,?,?,?,?)",
		hongbao.OpenKey(id, u), u, amount, hongbao.KindOpen, id, now, benchSet)
	return err
}

// batchInsert writes many shares of one packet with their credits and the
// packet's new remaining, in tx (the Redis design's writer).
func batchInsert(ctx context.Context, tx *sql.Tx, t hongbao.DayTable, id hongbao.PacketID, users []hongbao.UserID, amounts []int64) error {
	var remAmount int64
	var remCount, count int
	if err := tx.QueryRowContext(ctx, "SELECT remaining_amount, remaining_count, count FROM "+t.Packets()+" WHERE id = ? FOR UPDATE", id).
		Scan(&remAmount, &remCount, &count); err != nil {
		return err
	}
	now := time.Now().UTC()
	var d, o []string
	var dargs, oargs []any
	for i, u := range users {
		d, o = append(d, "(?,?,?,?,?)"), append(o, "(?,?,?,?,?,?,?)")
		dargs = append(dargs, id, u, amounts[i], count-remCount+1, now)
		oargs = append(oargs, hongbao.OpenKey(id, u), u, amounts[i], hongbao.KindOpen, id, now, benchSet)
		remCount--
		remAmount -= amounts[i]
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+t.Details()+" (packet_id, user_id, amount, seq, opened_at) VALUES "+strings.Join(d, ","), dargs...); err != nil {
		return fmt.Errorf("details: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at, set_name) VALUES "+strings.Join(o, ","), oargs...); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	_, err := tx.ExecContext(ctx, "UPDATE "+t.Packets()+" SET remaining_amount = ?, remaining_count = ? WHERE id = ?", remAmount, remCount, id)
	return err
}
