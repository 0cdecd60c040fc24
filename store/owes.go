package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrOwes is what Owes wraps when a SET still holds deliveries it owes.
var ErrOwes = errors.New("the SET still owes deliveries")

// OwesError says what a SET still has to deliver: outbox entries for the
// wallet and webhook events, pending (its settler still tries them) or
// failed (kept until replayed). Removing the SET would lose them.
type OwesError struct {
	Set                     string
	Outbox, Pending, Failed int
}

func (e *OwesError) Error() string {
	var what []string
	if e.Outbox > 0 {
		what = append(what, fmt.Sprintf("its outbox still holds %d entries for the wallet: keep its settler running until it is empty", e.Outbox))
	}
	if e.Pending > 0 {
		what = append(what, fmt.Sprintf("it holds %d pending webhook events: keep its settler running until they are delivered (hbctl webhook list --set %s)", e.Pending, e.Set))
	}
	if e.Failed > 0 {
		what = append(what, fmt.Sprintf("it holds %d failed webhook events: hbctl webhook list --set %s --state failed, then hbctl webhook replay --set %s and let its settler deliver them", e.Failed, e.Set, e.Set))
	}
	return "SET " + e.Set + ": " + strings.Join(what, "; ")
}

func (e *OwesError) Unwrap() error { return ErrOwes }

// Owes returns nil when the SET owes nothing: no outbox row for the wallet
// and no webhook event undelivered, pending or failed; otherwise an
// *OwesError (wrapping ErrOwes) with the counts. hbctl set remove refuses
// a SET that owes.
func (s *Store) Owes(ctx context.Context) error {
	outbox, _, err := s.OutboxBacklog(ctx)
	if err != nil {
		return err
	}
	pending, failed, _, err := s.EventBacklog(ctx)
	if err != nil {
		return err
	}
	if outbox+pending+failed == 0 {
		return nil
	}
	return &OwesError{Set: s.set, Outbox: outbox, Pending: pending, Failed: failed}
}
