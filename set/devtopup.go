package set

import (
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
	if key == "" || len(key) > maxIdemKey {
		return 0, nil, &hongbao.InvalidError{Code: "invalid_idempotency_key", Field: "Idempotency-Key",
			Message: "is required for a top-up (at most 200 bytes)"}
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
