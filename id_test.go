package hongbao

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// The values in this file are golden: they were computed by hand from the
// layout fixed in DESIGN.md (41 bits of ms since 2024-01-01T00:00:00Z | 10
// bits of bucket | 12 bits of sequence) and from the bucket hash. IDs are
// stored in MySQL and name tables; if one of these tests fails, existing
// data would move. Do not "fix" the expected values.

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load location %s: %v", name, err)
	}
	return loc
}

func utc(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return tm
}

func TestNewPacketIDGolden(t *testing.T) {
	tests := []struct {
		time   string
		bucket Bucket
		seq    int
		want   PacketID
	}{
		{"2024-01-01T00:00:00Z", 0, 1, 1},
		{"2024-01-01T00:00:00Z", 7, 0, 28672},                        // 7<<12
		{"2024-01-01T00:00:00Z", 999, 4095, 4095999},                 // 999<<12 | 4095
		{"2024-01-01T00:00:00.001Z", 0, 0, 4194304},                  // 1<<22
		{"2024-01-01T08:00:00.001+08:00", 0, 0, 4194304},             // same instant, other zone
		{"2024-02-29T15:59:59.999Z", 999, 4095, 21622475980701695},   // 5155199999 ms
		{"2024-02-29T16:00:00Z", 7, 0, 21622475980828672},            // 5155200000 ms
		{"2025-03-31T17:00:00Z", 530, 5, 165143170254970885},         // 39373200000 ms
		{"2026-12-31T23:59:59Z", 123, 42, 397177096503799850},        // 94694399000 ms
		{"2093-09-06T15:47:35.551Z", 999, 4095, 9223372036854677503}, // 2^41-1 ms: last ms of the epoch
	}
	for _, tt := range tests {
		got, err := NewPacketID(utc(t, tt.time), tt.bucket, tt.seq)
		if err != nil {
			t.Errorf("NewPacketID(%s, %d, %d): %v", tt.time, tt.bucket, tt.seq, err)
			continue
		}
		if got != tt.want {
			t.Errorf("NewPacketID(%s, %d, %d) = %d, want %d", tt.time, tt.bucket, tt.seq, got, tt.want)
		}
		// And back: the parts survive the round trip.
		if got.Bucket() != tt.bucket || got.Seq() != tt.seq || !got.Time().Equal(utc(t, tt.time)) {
			t.Errorf("%d: parts = (%s, %d, %d), want (%s, %d, %d)", got,
				got.Time().UTC().Format(time.RFC3339Nano), got.Bucket(), got.Seq(), tt.time, tt.bucket, tt.seq)
		}
	}
}

func TestNewPacketIDOutOfRange(t *testing.T) {
	ok := utc(t, "2025-01-01T00:00:00Z")
	tests := []struct {
		name   string
		time   time.Time
		bucket Bucket
		seq    int
	}{
		{"before epoch", utc(t, "2023-12-31T23:59:59.999Z"), 0, 0},
		{"after epoch end", utc(t, "2093-09-06T15:47:35.552Z"), 0, 0},
		{"negative bucket", ok, -1, 0},
		{"bucket 1000", ok, 1000, 0},
		{"bucket 1023", ok, 1023, 0},
		{"negative seq", ok, 0, -1},
		{"seq 4096", ok, 0, 4096},
	}
	for _, tt := range tests {
		if id, err := NewPacketID(tt.time, tt.bucket, tt.seq); err == nil {
			t.Errorf("%s: NewPacketID = %d, want an error", tt.name, id)
		}
	}
}

func TestPacketIDPartsGolden(t *testing.T) {
	shanghai := mustLoc(t, "Asia/Shanghai")
	tests := []struct {
		id       PacketID
		bucket   Bucket
		seq      int
		time     string
		dayCN    int
		dayUTC   int
		db       string
		packets  string // in Asia/Shanghai
		details  string // in Asia/Shanghai
		packetsU string // in UTC
	}{
		{28672, 7, 0, "2024-01-01T00:00:00Z", 1, 1, "db_00", "db_00.t_7_01", "db_00.t_7_01_detail", "db_00.t_7_01"},
		{4095999, 999, 4095, "2024-01-01T00:00:00Z", 1, 1, "db_99", "db_99.t_9_01", "db_99.t_9_01_detail", "db_99.t_9_01"},
		// 23:59:59.999 in Shanghai: still the 29th in both zones.
		{21622475980701695, 999, 4095, "2024-02-29T15:59:59.999Z", 29, 29, "db_99", "db_99.t_9_29", "db_99.t_9_29_detail", "db_99.t_9_29"},
		// One ms later it is 1 March in Shanghai and still the 29th in UTC.
		{21622475980828672, 7, 0, "2024-02-29T16:00:00Z", 1, 29, "db_00", "db_00.t_7_01", "db_00.t_7_01_detail", "db_00.t_7_29"},
		// 2025-04-01T01:00+08:00 in Shanghai, 31 March in UTC.
		{165143170254970885, 530, 5, "2025-03-31T17:00:00Z", 1, 31, "db_53", "db_53.t_0_01", "db_53.t_0_01_detail", "db_53.t_0_31"},
		{397177096503799850, 123, 42, "2026-12-31T23:59:59Z", 1, 31, "db_12", "db_12.t_3_01", "db_12.t_3_01_detail", "db_12.t_3_31"},
		{9223372036854677503, 999, 4095, "2093-09-06T15:47:35.551Z", 6, 6, "db_99", "db_99.t_9_06", "db_99.t_9_06_detail", "db_99.t_9_06"},
	}
	for _, tt := range tests {
		id := tt.id
		if got := id.Bucket(); got != tt.bucket {
			t.Errorf("%d.Bucket() = %d, want %d", id, got, tt.bucket)
		}
		if got := id.Seq(); got != tt.seq {
			t.Errorf("%d.Seq() = %d, want %d", id, got, tt.seq)
		}
		if got := id.Time().UTC().Format(time.RFC3339Nano); got != tt.time {
			t.Errorf("%d.Time() = %s, want %s", id, got, tt.time)
		}
		if got := id.Day(shanghai); got != tt.dayCN {
			t.Errorf("%d.Day(Asia/Shanghai) = %d, want %d", id, got, tt.dayCN)
		}
		if got := id.Day(time.UTC); got != tt.dayUTC {
			t.Errorf("%d.Day(UTC) = %d, want %d", id, got, tt.dayUTC)
		}
		cn := id.Table(shanghai)
		if cn.Bucket != tt.bucket || cn.Day != tt.dayCN {
			t.Errorf("%d.Table(Asia/Shanghai) = %+v, want {%d %d}", id, cn, tt.bucket, tt.dayCN)
		}
		if got := cn.DB(); got != tt.db {
			t.Errorf("%d DB = %s, want %s", id, got, tt.db)
		}
		if got := tt.bucket.DB(); got != tt.db {
			t.Errorf("Bucket(%d).DB() = %s, want %s", tt.bucket, got, tt.db)
		}
		if got := cn.Packets(); got != tt.packets {
			t.Errorf("%d Packets (Asia/Shanghai) = %s, want %s", id, got, tt.packets)
		}
		if got := cn.Details(); got != tt.details {
			t.Errorf("%d Details (Asia/Shanghai) = %s, want %s", id, got, tt.details)
		}
		if got := id.Table(time.UTC).Packets(); got != tt.packetsU {
			t.Errorf("%d Packets (UTC) = %s, want %s", id, got, tt.packetsU)
		}
		if got := id.Table(time.UTC).Details(); got != tt.packetsU+"_detail" {
			t.Errorf("%d Details (UTC) = %s, want %s", id, got, tt.packetsU+"_detail")
		}
		if got := id.String(); got == "" || got[0] == '-' {
			t.Errorf("%d.String() = %q", id, got)
		}
	}
}

func TestDayTableNames(t *testing.T) {
	tests := []struct {
		b       Bucket
		day     int
		db      string
		packets string
	}{
		{0, 1, "db_00", "db_00.t_0_01"},
		{7, 9, "db_00", "db_00.t_7_09"},
		{10, 10, "db_01", "db_01.t_0_10"},
		{99, 31, "db_09", "db_09.t_9_31"},
		{530, 15, "db_53", "db_53.t_0_15"},
		{999, 28, "db_99", "db_99.t_9_28"},
	}
	for _, tt := range tests {
		tab := DayTable{Bucket: tt.b, Day: tt.day}
		if got := tab.DB(); got != tt.db {
			t.Errorf("%+v.DB() = %s, want %s", tab, got, tt.db)
		}
		if got := tab.Packets(); got != tt.packets {
			t.Errorf("%+v.Packets() = %s, want %s", tab, got, tt.packets)
		}
		if got := tab.Details(); got != tt.packets+"_detail" {
			t.Errorf("%+v.Details() = %s, want %s_detail", tab, got, tt.packets)
		}
	}
}

// TestBucketForGolden pins BucketFor to xxhash64(8-byte big-endian sender ||
// key) % 1000. The values were computed once and cross-checked against
// xxhash.Sum64 of the concatenation. A retried send must land in the bucket
// of its first attempt, also across deploys: never change these.
func TestBucketForGolden(t *testing.T) {
	tests := []struct {
		sender UserID
		key    string
		want   Bucket
	}{
		{1, "", 634},
		{1, "a", 486},
		{42, "order-1", 741},
		{42, "order-2", 538},
		{7, "retry-key", 426},
		{123456789, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", 388},
		{9223372036854775807, "x", 979},
	}
	for _, tt := range tests {
		if got := BucketFor(tt.sender, []byte(tt.key)); got != tt.want {
			t.Errorf("BucketFor(%d, %q) = %d, want %d", tt.sender, tt.key, got, tt.want)
		}
		// Deterministic: the same input gives the same bucket again.
		if got := BucketFor(tt.sender, []byte(tt.key)); got != tt.want {
			t.Errorf("BucketFor(%d, %q) second call = %d, want %d", tt.sender, tt.key, got, tt.want)
		}
	}
}

func TestBucketForRange(t *testing.T) {
	seen := map[Bucket]bool{}
	for i := range 20000 {
		b := BucketFor(UserID(i), []byte{byte(i), byte(i >> 8)})
		if b < 0 || b >= Buckets {
			t.Fatalf("BucketFor(%d) = %d, outside 0..999", i, b)
		}
		seen[b] = true
	}
	// 20000 draws over 1000 buckets miss a given bucket with probability
	// e^-20; all should be hit.
	if len(seen) != Buckets {
		t.Errorf("20000 senders hit %d buckets, want all %d", len(seen), Buckets)
	}
}

func TestParsePacketID(t *testing.T) {
	tests := []struct {
		in   string
		want PacketID // 0: ErrInvalidID
	}{
		{"1", 1},
		{"28672", 28672},
		{"165143170254970885", 165143170254970885},
		{"9223372036854677503", 9223372036854677503},
		{"", 0},
		{"0", 0},
		{"-1", 0},
		{"-165143170254970885", 0},
		{"abc", 0},
		{"1.5", 0},
		{"1e3", 0},
		{"+5", 0},
		{"007", 0},
		{"0165143170254970885", 0}, // leading zero: not the canonical form
		{" 1", 0},
		{"1 ", 0},
		{"0x10", 0},
		{"12345678901234567890", 0}, // 20 digits: overflows int64
		{"9223372036854775808", 0},  // MaxInt64+1
		{"9223372036854775807", 0},  // MaxInt64: bucket bits are 1023
		{"4096000", 0},              // bucket 1000
		{"8384512", 0},              // 1 ms, bucket 1023
	}
	for _, tt := range tests {
		got, err := ParsePacketID(tt.in)
		if tt.want == 0 {
			if !errors.Is(err, ErrInvalidID) {
				t.Errorf("ParsePacketID(%q) = %d, %v; want ErrInvalidID", tt.in, got, err)
			}
			if got != 0 {
				t.Errorf("ParsePacketID(%q) = %d on error, want 0", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParsePacketID(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
		if got.String() != tt.in {
			t.Errorf("ParsePacketID(%q).String() = %q", tt.in, got.String())
		}
	}
}

func TestParseUserID(t *testing.T) {
	tests := []struct {
		in   string
		want UserID
	}{
		{"1", 1},
		{"42", 42},
		{"9223372036854775807", 9223372036854775807},
		{"", 0},
		{"0", 0},
		{"-1", 0},
		{"+1", 0},
		{"01", 0},
		{"1.0", 0},
		{"x", 0},
		{"9223372036854775808", 0},
	}
	for _, tt := range tests {
		got, err := ParseUserID(tt.in)
		if tt.want == 0 {
			if !errors.Is(err, ErrInvalidUser) {
				t.Errorf("ParseUserID(%q) = %d, %v; want ErrInvalidUser", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want || got.String() != tt.in {
			t.Errorf("ParseUserID(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestMinterFrozenClock(t *testing.T) {
	frozen := utc(t, "2025-03-31T17:00:00Z")
	m := NewMinter(func() time.Time { return frozen })
	const n = 10000
	const bucket Bucket = 530
	seen := make(map[PacketID]bool, n)
	var prev PacketID
	for i := range n {
		id, err := m.Next(bucket)
		if err != nil {
			t.Fatalf("Next #%d: %v", i, err)
		}
		if seen[id] {
			t.Fatalf("Next #%d = %d: duplicate", i, id)
		}
		seen[id] = true
		if id <= prev {
			t.Fatalf("Next #%d = %d, not above the previous %d", i, id, prev)
		}
		prev = id
		if id.Bucket() != bucket {
			t.Fatalf("Next #%d = %d in bucket %d, want %d", i, id, id.Bucket(), bucket)
		}
		if _, err := ParsePacketID(id.String()); err != nil {
			t.Fatalf("Next #%d = %d does not parse: %v", i, id, err)
		}
	}
	// The first ID is (frozen, 530, 0); after 4096 IDs the minter borrows the
	// next millisecond rather than reusing a sequence.
	first, _ := NewPacketID(frozen, bucket, 0)
	m2 := NewMinter(func() time.Time { return frozen })
	for i := range n {
		id, _ := m2.Next(bucket)
		wantMs := frozen.Add(time.Duration(i/4096) * time.Millisecond)
		want, _ := NewPacketID(wantMs, bucket, i%4096)
		if i == 0 && id != first {
			t.Fatalf("first ID = %d, want %d", id, first)
		}
		if id != want {
			t.Fatalf("ID #%d = %d, want %d", i, id, want)
		}
	}
}

func TestMinterClockBackwards(t *testing.T) {
	now := utc(t, "2025-06-01T00:00:00Z")
	var mu sync.Mutex
	m := NewMinter(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	a, err := m.Next(1)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(-time.Second) // NTP step back
	mu.Unlock()
	b, err := m.Next(1)
	if err != nil {
		t.Fatal(err)
	}
	if b <= a {
		t.Errorf("after the clock stepped back: %d, not above %d", b, a)
	}
}

func TestMinterConcurrent(t *testing.T) {
	m := NewMinter(time.Now)
	const workers, per = 8, 2000
	ids := make([][]PacketID, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				id, err := m.Next(Bucket(w * 100))
				if err != nil {
					t.Error(err)
					return
				}
				ids[w] = append(ids[w], id)
			}
		}()
	}
	wg.Wait()
	seen := make(map[PacketID]bool, workers*per)
	for w, list := range ids {
		if len(list) != per {
			t.Fatalf("worker %d minted %d IDs, want %d", w, len(list), per)
		}
		for _, id := range list {
			if seen[id] {
				t.Fatalf("duplicate ID %d", id)
			}
			seen[id] = true
			if id.Bucket() != Bucket(w*100) {
				t.Fatalf("ID %d in bucket %d, want %d", id, id.Bucket(), w*100)
			}
		}
	}
	// Across buckets the (time, seq) pairs are also distinct: one minter
	// never hands out the same sequence twice in a millisecond.
	pairs := map[[2]int64]bool{}
	for _, list := range ids {
		for _, id := range list {
			k := [2]int64{id.Time().UnixMilli(), int64(id.Seq())}
			if pairs[k] {
				t.Fatalf("time/seq %v minted twice", k)
			}
			pairs[k] = true
		}
	}
}
