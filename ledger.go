package hongbao

import "time"

// Ledger entry kinds.
const (
	KindTopUp  = "topup"  // operator credit
	KindSend   = "send"   // debit of a packet's total at send
	KindVoid   = "void"   // a send abandoned before its debit: takes its key, moves nothing
	KindOpen   = "open"   // credit of a share to its opener
	KindRefund = "refund" // what nobody took, back to the sender
)

// Entry is one wallet ledger entry. Key makes it unique: applying an entry
// twice is a no-op, which turns at-least-once delivery into exactly-once.
type Entry struct {
	Key    string
	User   UserID
	Amount int64 // fen; negative for debits
	Kind   string
	Packet PacketID // 0 for top-ups
	At     time.Time
	Seq    int64 // ledger order, for paging
}

// The keys of a packet's entries: one debit at send (or the void that
// forbids it), one credit per opener, one refund. Each names the packet, so
// a refund can only go to the packet's own sender's entry.

// SendKey is the key of the sender's debit (or void) for packet id.
func SendKey(id PacketID) string { return "send:" + id.String() }

// RefundKey is the key of the refund of what nobody took of packet id.
func RefundKey(id PacketID) string { return "refund:" + id.String() }

// OpenKey is the key of user u's credit of a share of packet id.
func OpenKey(id PacketID, u UserID) string { return "open:" + id.String() + ":" + u.String() }
