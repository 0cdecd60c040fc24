package store

import (
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
)

// Ledger keys name their source: the packet of a send or refund, the
// share of an open; anything else has none in a SET.
func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want ledgerKey
		ok   bool
	}{
		{"send:123", ledgerKey{kind: hongbao.KindSend, packet: 123}, true},
		{"refund:123", ledgerKey{kind: hongbao.KindRefund, packet: 123}, true},
		{"open:123:42", ledgerKey{kind: hongbao.KindOpen, packet: 123, user: 42}, true},
		{hongbao.OpenKey(7, 8), ledgerKey{kind: hongbao.KindOpen, packet: 7, user: 8}, true},
		{"open:123", ledgerKey{}, false},
		{"send:123:42", ledgerKey{}, false},
		{"topup:dev-grant:42", ledgerKey{}, false},
		{"send:-1", ledgerKey{}, false},
		{"send:x", ledgerKey{}, false},
		{"", ledgerKey{}, false},
	} {
		got, ok := parseKey(tc.key)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseKey(%q) = %+v, %v; want %+v, %v", tc.key, got, ok, tc.want, tc.ok)
		}
	}
}
