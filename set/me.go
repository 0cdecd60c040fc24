package set

import (
	"net/http"
	"strconv"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

func (s *Server) handleWallet(r *http.Request, user hongbao.UserID) (int, any, error) {
	if s.wallet == nil {
		return 0, nil, hongbao.ErrUnavailable
	}
	b, err := s.wallet.Balance(r.Context(), user)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, api.WalletJSON{User: user.String(), Balance: b}, nil
}

// handleHistory lists the user's ledger entries of kind, newest first. The
// wallet's ledger is indexed by user, so no SET is scanned.
func (s *Server) handleHistory(kind string) handler {
	return func(r *http.Request, user hongbao.UserID) (int, any, error) {
		if s.wallet == nil {
			return 0, nil, hongbao.ErrUnavailable
		}
		cursor, limit, err := api.Page(r.URL.Query())
		if err != nil {
			return 0, nil, err
		}
		es, next, err := s.wallet.History(r.Context(), user, kind, cursor, limit)
		if err != nil {
			return 0, nil, err
		}
		out := api.HistoryJSON{Items: make([]api.HistoryItem, 0, len(es))}
		for _, e := range es {
			out.Items = append(out.Items, api.HistoryItem{Packet: e.Packet.String(), Amount: max(e.Amount, -e.Amount),
				At: e.At.In(s.loc).Format(api.TimeFormat)})
		}
		if next > 0 {
			out.NextCursor = strconv.FormatInt(next, 10)
		}
		return http.StatusOK, out, nil
	}
}
