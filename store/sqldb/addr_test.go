package sqldb

import "testing"

// TestAddr: a DSN's address for messages, never its password, and "?" for
// one that does not parse.
func TestAddr(t *testing.T) {
	for dsn, want := range map[string]string{
		"hb:secret@tcp(10.0.0.7:3307)/hb_meta?parseTime=true": "10.0.0.7:3307",
		"hb:secret@tcp(db.example:3306)/":                     "db.example:3306",
		"not a dsn":                                           "?",
	} {
		if got := Addr(dsn); got != want {
			t.Errorf("Addr(%q) = %q; want %q", dsn, got, want)
		}
	}
}
