package hongbao

import "testing"

// TestLedgerKeysGolden: the keys are the wallet's exactly-once guarantee and
// live in the ledger for ever; changing their format would make a
// re-delivery after an upgrade a second credit.
func TestLedgerKeysGolden(t *testing.T) {
	id := PacketID(382977104874553344)
	tests := []struct{ got, want string }{
		{SendKey(id), "send:382977104874553344"},
		{RefundKey(id), "refund:382977104874553344"},
		{OpenKey(id, 42), "open:382977104874553344:42"},
		{OpenKey(id, 1<<62), "open:382977104874553344:4611686018427387904"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("key %q, want %q", tt.got, tt.want)
		}
	}
	// Every key of one packet is distinct, and two users never share one.
	seen := map[string]bool{}
	for _, k := range []string{SendKey(id), RefundKey(id), OpenKey(id, 1), OpenKey(id, 11), OpenKey(id+1, 1)} {
		if seen[k] {
			t.Errorf("key %q twice", k)
		}
		seen[k] = true
	}
}
