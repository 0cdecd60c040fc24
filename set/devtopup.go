package set

import (
	"fmt"
	"net/http"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// handleDevTopUp credits the user with the dev grant once per
// Idempotency-Key (the red-packet page's "top up" in a dev cluster). It is
// registered only when Deps.DevGrant is positive: never in production.
func (s *Server) handleDevTopUp(r *http.Request, user hongbao.UserID) (int, any, error) {
	if s.wallet == nil {
		return 0, nil, hongbao.ErrUnavailable
	}
	key := r.Header.Get("Idempotency-Key")
	if !topUpKey(key) {
		return 0, nil, &hongbao.InvalidError{Code: "invalid_idempotency_key", Field: "Idempotency-Key",
			Message: fmt.Sprintf("is required for a top-up (at most %d printable ASCII characters)", maxTopUpKey)}
	}
	_, _, err := s.wallet.Apply(r.Context(), hongbao.Entry{Key: "topup:dev:" + user.String() + ":" + key, User: user,
		Amount: s.grant, Kind: hongbao.KindTopUp})
	if err != nil {
		return 0, nil, err
	}
	b, err := s.wallet.Balance(r.Context(), user)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, api.WalletJSON{User: user.String(), Balance: b}, nil
}

// maxTopUpKey bounds a top-up's Idempotency-Key: the ledger's entry key
// (VARCHAR(96)) holds "topup:dev:<user>:<key>", a user ID of up to 19
// digits.
const maxTopUpKey = 64

// topUpKey reports whether key is a top-up's Idempotency-Key the ledger's
// entry key can hold: 1 to maxTopUpKey printable ASCII characters.
func topUpKey(key string) bool {
	if key == "" || len(key) > maxTopUpKey {
		return false
	}
	for i := range len(key) {
		if key[i] < 0x20 || key[i] > 0x7e {
			return false
		}
	}
	return true
}
