package hongbao

import (
	"errors"
	"testing"
)

// FuzzParsePacketID: ParsePacketID takes exactly the canonical decimal
// form of a positive ID whose bucket exists, and refuses everything else
// with ErrInvalidID: an accepted ID prints back as its input, so one
// packet has one spelling in URLs, logs and table names.
func FuzzParsePacketID(f *testing.F) {
	for _, s := range []string{"1", "165143170254970885", "9223372036854677503", "", "0", "-1", "+5", "007",
		"1e3", " 1", "9223372036854775807", "9223372036854775808", "4096000", "٣", "0x10", "1_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParsePacketID(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidID) || id != 0 {
				t.Fatalf("ParsePacketID(%q) = %d, %v; want 0, ErrInvalidID", s, id, err)
			}
			return
		}
		if id <= 0 || id.Bucket() < 0 || id.Bucket() >= Buckets || id.String() != s {
			t.Fatalf("ParsePacketID(%q) = %d (bucket %d, printed %q)", s, id, id.Bucket(), id.String())
		}
	})
}
