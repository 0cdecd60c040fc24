package wallet

import (
	"context"
	"fmt"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/schema"
)

// Totals are the ledger's sums by kind.
type Totals struct {
	Debits, Credits, Refunds, TopUps int64
	CreditsN                         int
}

// Verify sums the ledger and checks that every balance equals the
// sum of its entries and none is negative.
func (w *Wallet) Verify(ctx context.Context) (Totals, []string, error) {
	var tot Totals
	byKind, err := schema.SumsByKind(ctx, w.db, "ledger")
	if err != nil {
		return tot, nil, fmt.Errorf("verify ledger: %w", err)
	}
	tot.Debits = -byKind[hongbao.KindSend].Sum
	tot.Credits, tot.CreditsN = byKind[hongbao.KindOpen].Sum, byKind[hongbao.KindOpen].N
	tot.Refunds = byKind[hongbao.KindRefund].Sum
	tot.TopUps = byKind[hongbao.KindTopUp].Sum
	bal, err := w.db.QueryContext(ctx, `SELECT u.user_id, COALESCE(a.balance, 0), COALESCE(l.s, 0) FROM
		(SELECT user_id FROM accounts UNION SELECT user_id FROM ledger) u
		LEFT JOIN accounts a ON a.user_id = u.user_id
		LEFT JOIN (SELECT user_id, SUM(amount) s FROM ledger GROUP BY user_id) l ON l.user_id = u.user_id
		WHERE COALESCE(a.balance, 0) != COALESCE(l.s, 0) OR COALESCE(a.balance, 0) < 0`)
	if err != nil {
		return tot, nil, fmt.Errorf("verify balances: %w", err)
	}
	defer bal.Close()
	var bad []string
	for bal.Next() {
		var u, b, s int64
		if err := bal.Scan(&u, &b, &s); err != nil {
			return tot, nil, err
		}
		bad = append(bad, fmt.Sprintf("user %d: balance %d != ledger sum %d", u, b, s))
	}
	return tot, bad, bal.Err()
}
