package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// Webhook event types, written to hb_set.events while webhooks are on
// (WithEvents).
const (
	EventSent     = "packet.sent"     // a packet became openable (funded)
	EventOpened   = "packet.opened"   // a share was taken
	EventFinished = "packet.finished" // the last share was taken
	EventExpired  = "packet.expired"  // closed at expiry with a rest to refund
	EventRefunded = "packet.refunded" // the rest reached the sender's wallet
)

// EventTypes returns every type of event the store writes, in the order a
// packet's events come (a function: nobody can change the list).
func EventTypes() []string {
	return []string{EventSent, EventOpened, EventFinished, EventExpired, EventRefunded}
}

// Event is a webhook event of hb_set.events.
type Event struct {
	Row       int64  // the row's id in hb_set.events
	ID        string // what receivers drop duplicates by
	Type      string
	Packet    hongbao.PacketID
	Data      string // a JSON object
	CreatedAt time.Time
	// Delivery state: attempts made, when the next is due, the endpoints
	// (Endpoint) that accepted it, the last failure, and Failed once the
	// deliverer gave up.
	Attempts    int
	NextAt      time.Time
	DeliveredTo string
	LastError   string
	Failed      bool
}

// EventID is the ID of the event of type typ about packet id (and user u
// for an open): the same event always has the same ID, so a receiver
// drops a redelivery by it.
func EventID(typ string, id hongbao.PacketID, u hongbao.UserID) string {
	if typ == EventOpened {
		return typ + ":" + id.String() + ":" + u.String()
	}
	return typ + ":" + id.String()
}

// WithEvents makes the store write webhook events in the transactions of
// the changes they report (off by default: no events, no cost).
func (s *Store) WithEvents() *Store {
	s.events = true
	return s
}

// newEvent is an event to insert.
type newEvent struct {
	typ  string
	id   hongbao.PacketID
	data string
}

// sentEvent is packet.sent of p (a packet, funded).
func sentEvent(p *hongbao.Packet) newEvent {
	return newEvent{EventSent, p.ID, fmt.Sprintf(`{"packet":"%s","sender":"%s","total":%d,"count":%d,"type":%s,"expires_at":"%s"}`,
		p.ID, p.Sender, p.Total, p.Count, strconv.Quote(string(p.Type)), p.ExpiresAt.UTC().Format(eventTime))}
}

// openedData is the data of packet.opened.
func openedData(id hongbao.PacketID, u hongbao.UserID, amount int64) string {
	return fmt.Sprintf(`{"packet":"%s","user":"%s","amount":%d}`, id, u, amount)
}

// eventTime is how events write times: RFC 3339 in UTC with milliseconds.
const eventTime = "2006-01-02T15:04:05.000Z07:00"

// insertEvents writes evs in one statement of tx at now, when events are on.
func (s *Store) insertEvents(ctx context.Context, tx *sql.Tx, now time.Time, evs ...newEvent) error {
	if !s.events || len(evs) == 0 {
		return nil
	}
	at := now.UTC().Truncate(time.Millisecond)
	args := make([]any, 0, 7*len(evs))
	for _, e := range evs {
		args = append(args, EventID(e.typ, e.id, 0), e.typ, e.id, e.data, at, s.set, at)
	}
	_, err := tx.ExecContext(ctx, "INSERT INTO hb_set.events (event_key, type, packet_id, data, created_at, set_name, next_at) VALUES (?,?,?,?,?,?,?)"+
		strings.Repeat(",(?,?,?,?,?,?,?)", len(evs)-1), args...)
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	return nil
}

// openEvents appends to the open transaction's block (t: its time, s: its
// SET) one multi-row insert of packet.opened for every fresh share, and
// packet.finished for every packet whose last share it took, naming the
// best-luck opener (largest share, first opened on a tie, as
// hongbao.Best) read from the detail rows the block just wrote.
func (s *Store) openEvents(q *strings.Builder, args []any, fresh []share, byPacket map[*hongbao.Packet][]hongbao.Record, now time.Time) []any {
	if !s.events {
		return args
	}
	q.WriteString("INSERT INTO hb_set.events(event_key,type,packet_id,data,created_at,set_name,next_at)VALUES(?,?,?,?,t,s,t)" +
		strings.Repeat(",(?,?,?,?,t,s,t)", len(fresh)-1) + ";")
	for _, sh := range fresh {
		args = append(args, EventID(EventOpened, sh.p.ID, sh.rec.User), EventOpened, sh.p.ID, openedData(sh.p.ID, sh.rec.User, sh.rec.Amount))
	}
	done := make(map[*hongbao.Packet]bool, len(byPacket))
	for _, sh := range fresh { // in the shares' order: the block's text is the same for the same work
		p := sh.p
		if p.RemainingCount != 0 || done[p] {
			continue
		}
		done[p] = true
		q.WriteString("INSERT INTO hb_set.events(event_key,type,packet_id,data,created_at,set_name,next_at)" +
			"SELECT ?,?,?,CONCAT('{\"packet\":\"',packet_id,'\",\"best\":\"',user_id,'\",\"best_amount\":',amount,',\"duration_ms\":',?,'}'),t,s,t FROM " +
			s.Table(p.ID).Details() + " WHERE packet_id=? ORDER BY amount DESC,seq LIMIT 1;")
		args = append(args, EventID(EventFinished, p.ID, 0), EventFinished, p.ID, now.Sub(p.CreatedAt).Milliseconds(), p.ID)
	}
	return args
}

// refundedEvents writes packet.refunded for the refunds among the outbox
// rows ids, in tx, the transaction that records their delivery to the
// wallet. A crash between the wallet's commit and tx re-delivers the
// refund (the ledger ignores it) and writes the event then.
func (s *Store) refundedEvents(ctx context.Context, tx *sql.Tx, ids []any) error {
	if !s.events {
		return nil
	}
	at := s.now().UTC().Truncate(time.Millisecond)
	in := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
	args := append([]any{EventRefunded, EventRefunded, at, s.set, at}, ids...)
	args = append(args, hongbao.KindRefund, s.set)
	_, err := tx.ExecContext(ctx, "INSERT INTO hb_set.events (event_key, type, packet_id, data, created_at, set_name, next_at) "+
		"SELECT CONCAT(?, ':', packet_id), ?, packet_id, CONCAT('{\"packet\":\"', packet_id, '\",\"user\":\"', user_id, '\",\"amount\":', amount, '}'), ?, ?, ? "+
		"FROM hb_set.outbox WHERE id IN ("+in+") AND kind = ? AND set_name IN (?, '') ORDER BY id", args...)
	if err != nil {
		return fmt.Errorf("refunded events: %w", err)
	}
	return nil
}

// packet is the packet n creates, as packet.sent describes it.
func (n NewPacket) packet() *hongbao.Packet {
	return &hongbao.Packet{ID: n.ID, Sender: n.Sender, Total: n.Req.Total, Count: n.Req.Count, Type: n.Req.Type,
		ExpiresAt: n.ID.Time().Add(n.Expiry)}
}
