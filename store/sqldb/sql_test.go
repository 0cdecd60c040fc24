package sqldb

import "testing"

func TestPlaceholders(t *testing.T) {
	for _, tt := range []struct {
		n         int
		one, want string
	}{
		{1, "?", "?"},
		{3, "?", "?,?,?"},
		{2, "(?,?,?)", "(?,?,?),(?,?,?)"},
	} {
		if got := Placeholders(tt.n, tt.one); got != tt.want {
			t.Errorf("Placeholders(%d, %q) = %q, want %q", tt.n, tt.one, got, tt.want)
		}
	}
}
