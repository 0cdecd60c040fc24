package hongbao

import "errors"

// Error is a domain outcome with a stable machine-readable code. The code is
// what clients see in problem JSON; the HTTP status is chosen by the API
// layer from the code alone.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Domain outcomes. Adapters wrap them with context using %w; callers test
// with errors.Is.
var (
	ErrNotFound      = &Error{"not_found", "no such packet"}
	ErrSoldOut       = &Error{"sold_out", "all shares of the packet are taken"}
	ErrAlreadyOpened = &Error{"already_opened", "the user has already opened the packet"}
	ErrExpired       = &Error{"expired", "the packet has expired"}
	ErrBusy          = &Error{"busy", "the packet is busy, retry shortly"}
	// ErrMoving is a busy answer whose cause is known: the packet's bucket
	// is frozen while it moves to another SET, for well under a second.
	// The queue waits it out instead of failing other buckets' opens.
	ErrMoving            = &Error{"busy", "the packet's bucket is moving to another SET, retry shortly"}
	ErrUnavailable       = &Error{"unavailable", "the service is shutting down or not ready"}
	ErrInvalidID         = &Error{"invalid_id", "the packet id is malformed"}
	ErrInvalidUser       = &Error{"invalid_user", "the user id is malformed"}
	ErrUnauthorized      = &Error{"unauthorized", "missing or invalid token"}
	ErrTokenExpired      = &Error{"token_expired", "the token has expired"}
	ErrInsufficientFunds = &Error{"insufficient_funds", "the balance does not cover the packet"}
	ErrIdempotencyReuse  = &Error{"idempotency_key_reused", "the Idempotency-Key was used for a different request"}
	ErrWrongSet          = &Error{"wrong_set", "this SET does not own the packet's bucket"}
	ErrDuplicateID       = &Error{"duplicate_id", "the packet id is already taken"}
	// ErrSendCancelled answers a send retried under its Idempotency-Key
	// after the settler's sweeper cancelled it: its debit could not be
	// made in time (the wallet was unreachable), so nothing was debited and
	// the packet never takes opens. The key stays bound to it.
	ErrSendCancelled = &Error{"send_cancelled", "the send was cancelled before its debit, nothing was debited; send again with a new Idempotency-Key"}
	// ErrClientClosed is the outcome of a request whose client went away
	// before its answer: nobody reads it, but logs and metrics must not
	// count it as the server's fault.
	ErrClientClosed = &Error{"client_closed", "the client closed the request before its answer"}
)

// InvalidError reports bad input: Code says what was wrong (invalid_total,
// count_over_limit...), Field names the input.
type InvalidError struct {
	Code    string
	Field   string
	Message string
}

func (e *InvalidError) Error() string { return e.Code + ": " + e.Field + ": " + e.Message }

// Code returns the domain code of err, or "internal" when err carries none.
func Code(err error) string {
	var de *Error
	if errors.As(err, &de) {
		return de.Code
	}
	var ie *InvalidError
	if errors.As(err, &ie) {
		return ie.Code
	}
	return "internal"
}
