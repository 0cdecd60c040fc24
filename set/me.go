package set

import (
	"fmt"
	"net/http"
	"strconv"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/store/statement"
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
		q, err := api.Query(r.URL.RawQuery)
		if err != nil {
			return 0, nil, err
		}
		cursor, limit, err := api.Page(q)
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

// statementLimit bounds the entries a monthly statement lists (its totals
// and balances count every entry).
const statementLimit = 1000

// handleStatement answers the user's own ledger entries of a month
// (?month=YYYY-MM in the cluster's time zone, default the current one)
// with their totals and the user's opening and closing balance, read from
// one snapshot of the wallet.
func (s *Server) handleStatement(r *http.Request, user hongbao.UserID) (int, any, error) {
	if s.wallet == nil {
		return 0, nil, hongbao.ErrUnavailable
	}
	q, err := api.Query(r.URL.RawQuery)
	if err != nil {
		return 0, nil, err
	}
	month := q.Get("month")
	if month == "" {
		month = s.now().In(s.loc).Format("2006-01")
	}
	from, to, err := statement.ParseMonth(month, s.loc)
	if err == nil && (from.UTC().Year() < 1 || to.UTC().Year() > 9999) {
		// The wallet's times are DATETIMEs: the driver refuses the rest.
		err = fmt.Errorf("%q is outside the years 0001-9999 (UTC) a wallet time can hold", month)
	}
	if err != nil {
		return 0, nil, &hongbao.InvalidError{Code: "invalid_month", Field: "month", Message: err.Error()}
	}
	snap, err := s.wallet.Snapshot(r.Context())
	if err != nil {
		return 0, nil, err
	}
	defer snap.Close() //nolint:errcheck // read-only: nothing to lose
	st, more, err := statement.Monthly(r.Context(), snap, user, month, from, to, statementLimit)
	if err != nil {
		return 0, nil, err
	}
	j := st.JSON()
	j.More = more
	return http.StatusOK, j, nil
}
