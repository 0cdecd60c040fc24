// Package hongbao holds the domain of the red-packet service: packet IDs and
// the buckets and day tables they name, the rules of money, tokens and the
// domain errors. It does no I/O; every adapter (MySQL, memcached, HTTP)
// depends on it and never the other way round.
package hongbao

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Layout of a PacketID (Instagram-style, 63 bits used):
//
//	41 bits milliseconds since Epoch | 10 bits bucket (0..999) | 12 bits sequence
const (
	seqBits    = 12
	bucketBits = 10
	timeBits   = 41
	maxSeq     = 1<<seqBits - 1
	// Buckets is the number of buckets data is split into.
	Buckets = 1000
)

// epochMs is time zero of packet IDs.
var epochMs = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// PacketID identifies a red packet. It carries the packet's bucket and
// creation time, so its tables are known without any lookup.
type PacketID int64

// UserID identifies a user. Like PacketID it is shown as a decimal string.
type UserID int64

// Bucket is the unit of data placement: 0..Buckets-1.
type Bucket int

// NewPacketID assembles an ID from its parts. It reports an error when a part
// does not fit its field, so a bad clock or bucket can never alias another ID.
func NewPacketID(t time.Time, b Bucket, seq int) (PacketID, error) {
	ms := t.UnixMilli() - epochMs
	switch {
	case ms < 0 || ms >= 1<<timeBits:
		return 0, fmt.Errorf("packet id: time %s outside the ID epoch", t.UTC().Format(time.RFC3339))
	case b < 0 || b >= Buckets:
		return 0, fmt.Errorf("packet id: bucket %d out of range", b)
	case seq < 0 || seq > maxSeq:
		return 0, fmt.Errorf("packet id: sequence %d out of range", seq)
	}
	return PacketID(ms<<(bucketBits+seqBits) | int64(b)<<seqBits | int64(seq)), nil
}

// ParsePacketID parses the decimal form of an ID and checks its fields, so
// that a malformed ID is refused before it can name a table.
func ParsePacketID(s string) (PacketID, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || len(s) > 19 || s[0] == '+' || s[0] == '0' {
		return 0, ErrInvalidID
	}
	id := PacketID(n)
	if id.Bucket() >= Buckets {
		return 0, ErrInvalidID
	}
	return id, nil
}

// ParseUserID parses the decimal form of a user ID.
func ParseUserID(s string) (UserID, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || s[0] == '+' || s[0] == '0' {
		return 0, fmt.Errorf("user id %q: %w", s, ErrInvalidUser)
	}
	return UserID(n), nil
}

// String returns the decimal form used in JSON and URLs.
func (id PacketID) String() string { return strconv.FormatInt(int64(id), 10) }

// String returns the decimal form used in JSON.
func (u UserID) String() string { return strconv.FormatInt(int64(u), 10) }

// Bucket returns the bucket the ID was minted in.
func (id PacketID) Bucket() Bucket { return Bucket(int64(id) >> seqBits & (1<<bucketBits - 1)) }

// Time returns the creation time encoded in the ID (millisecond precision).
func (id PacketID) Time() time.Time {
	return time.UnixMilli(int64(id)>>(bucketBits+seqBits) + epochMs)
}

// Seq returns the sequence number of the ID within its millisecond.
func (id PacketID) Seq() int { return int(int64(id) & maxSeq) }

// Day returns the day of month (1..31) of the ID's creation in loc: the dd
// of its tables.
func (id PacketID) Day(loc *time.Location) int { return id.Time().In(loc).Day() }

// Table returns the database and the two table names of the packet:
// db_xx, t_y_dd and t_y_dd_detail.
func (id PacketID) Table(loc *time.Location) DayTable {
	return DayTable{Bucket: id.Bucket(), Day: id.Day(loc)}
}

// DB returns the database name of the bucket: db_xx with xx = b/10.
func (b Bucket) DB() string { return fmt.Sprintf("db_%02d", int(b)/10) }

// DayTable names the tables of one bucket and one day of the month.
type DayTable struct {
	Bucket Bucket
	Day    int // 1..31
}

// DB is the database holding the tables.
func (t DayTable) DB() string { return t.Bucket.DB() }

// Packets is the qualified packet table: db_xx.t_y_dd.
func (t DayTable) Packets() string {
	return fmt.Sprintf("%s.t_%d_%02d", t.DB(), int(t.Bucket)%10, t.Day)
}

// Details is the qualified detail table: db_xx.t_y_dd_detail.
func (t DayTable) Details() string { return t.Packets() + "_detail" }

// BucketFor picks the bucket of a new packet from its sender and idempotency
// key, so that a retried send lands where its first attempt did. Without a
// key the caller passes random bytes as the key.
func BucketFor(sender UserID, key []byte) Bucket {
	var d xxhash.Digest
	d.Reset()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(sender))
	_, _ = d.Write(b[:]) // xxhash writes never fail
	_, _ = d.Write(key)
	return Bucket(d.Sum64() % Buckets)
}

// Minter mints packet IDs. It is safe for concurrent use. IDs are unique for
// one Minter; two minters may collide, which the packet table's primary key
// turns into an error the caller retries with a fresh ID.
type Minter struct {
	now    func() time.Time
	mu     sync.Mutex
	lastMs int64
	seq    int
}

// NewMinter returns a Minter reading time from now.
func NewMinter(now func() time.Time) *Minter { return &Minter{now: now} }

// Next mints an ID in bucket b. When the sequence of one millisecond is
// used up it moves to the next millisecond rather than repeating an ID.
func (m *Minter) Next(b Bucket) (PacketID, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms := m.now().UnixMilli()
	if ms <= m.lastMs {
		m.seq++
		if m.seq > maxSeq {
			m.lastMs++
			m.seq = 0
		}
		ms = m.lastMs
	} else {
		m.lastMs, m.seq = ms, 0
	}
	return NewPacketID(time.UnixMilli(ms), b, m.seq)
}

// mintTries is how many IDs Mint tries before giving up: a collision
// needs two minters in one millisecond and bucket, so a second ID all but
// always succeeds.
const mintTries = 4

// Mint is the one way a send gets its packet ID: it picks the bucket from
// the sender and the idempotency key (random bytes without one, so keyless
// sends spread over the buckets), mints an ID there and passes it to try.
// When try reports ErrDuplicateID (the ID is another minter's packet), it mints again in the same bucket, so a
// retried send still meets its first attempt's idempotency key.
func (m *Minter) Mint(sender UserID, idempotencyKey string, try func(PacketID) error) error {
	key := []byte(idempotencyKey)
	if len(key) == 0 {
		key = make([]byte, 16)
		_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
	}
	b := BucketFor(sender, key)
	var err error
	for range mintTries {
		var id PacketID
		if id, err = m.Next(b); err != nil {
			return err
		}
		if err = try(id); !errors.Is(err, ErrDuplicateID) {
			return err
		}
	}
	return err
}
