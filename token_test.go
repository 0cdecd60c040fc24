package hongbao

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var (
	testSecret = []byte("test-secret-0123456789abcdef")
	tokenNow   = time.Date(2025, 3, 31, 17, 0, 0, 0, time.UTC)
)

func TestTokenRoundTrip(t *testing.T) {
	s := NewSigner(testSecret)
	for _, u := range []UserID{1, 42, 9223372036854775807} {
		tok := s.Sign(u, tokenNow.Add(time.Hour))
		if !strings.HasPrefix(tok, u.String()+".") {
			t.Errorf("Sign(%d) = %q, want it to start with the user", u, tok)
		}
		got, err := s.Verify(tok, tokenNow)
		if err != nil || got != u {
			t.Errorf("Verify(Sign(%d)) = %d, %v", u, got, err)
		}
		// A second Signer with the same secret (another process) agrees.
		got, err = NewSigner(append([]byte(nil), testSecret...)).Verify(tok, tokenNow)
		if err != nil || got != u {
			t.Errorf("Verify by another Signer(Sign(%d)) = %d, %v", u, got, err)
		}
	}
}

func TestTokenFormat(t *testing.T) {
	tok := NewSigner(testSecret).Sign(42, time.Unix(1743440400, 0))
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[0] != "42" || parts[1] != "1743440400" || len(parts[2]) != 43 {
		t.Errorf("Sign = %q, want 42.1743440400.<43 chars of base64url HMAC-SHA256>", tok)
	}
}

func TestTokenExpired(t *testing.T) {
	s := NewSigner(testSecret)
	exp := tokenNow.Add(time.Minute)
	tok := s.Sign(7, exp)
	tests := []struct {
		now  time.Time
		want error
	}{
		{exp.Add(-time.Second), nil},
		{exp, ErrTokenExpired}, // valid until, not including, exp
		{exp.Add(time.Nanosecond), ErrTokenExpired},
		{exp.Add(48 * time.Hour), ErrTokenExpired},
	}
	for _, tt := range tests {
		u, err := s.Verify(tok, tt.now)
		if tt.want == nil {
			if err != nil || u != 7 {
				t.Errorf("Verify at %s = %d, %v; want 7", tt.now, u, err)
			}
			continue
		}
		if !errors.Is(err, tt.want) || u != 0 {
			t.Errorf("Verify at %s = %d, %v; want %v", tt.now, u, err, tt.want)
		}
	}
}

func TestTokenRejected(t *testing.T) {
	s := NewSigner(testSecret)
	exp := tokenNow.Add(time.Hour)
	good := s.Sign(42, exp)
	i := strings.LastIndexByte(good, '.')
	mac := good[i+1:]
	flip := []byte(good)
	if flip[len(flip)-1] == 'A' {
		flip[len(flip)-1] = 'B'
	} else {
		flip[len(flip)-1] = 'A'
	}
	tests := []struct {
		name string
		tok  string
	}{
		{"empty", ""},
		{"no dots", "abc"},
		{"two parts", "a.b"},
		{"three junk parts", "x.y.z"},
		{"just dots", ".."},
		{"flipped mac byte", string(flip)},
		{"mac removed", good[:i]},
		{"mac empty", good[:i+1]},
		{"other user, same mac", "43" + good[2:]},
		{"later expiry, same mac", "42." + "9999999999" + good[i:]},
		{"other secret", NewSigner([]byte("another-secret-0123456789abcdef")).Sign(42, exp)},
		{"empty secret", NewSigner(nil).Sign(42, exp)},
		{"user 0", s.Sign(0, exp)},
		{"negative user", s.Sign(-5, exp)},
		{"leading zero user", "042." + strings.SplitN(good, ".", 3)[1] + "." + string(s.mac(nil, "042."+strings.SplitN(good, ".", 3)[1]))},
		{"plus user", "+42.1." + string(s.mac(nil, "+42.1"))},
		{"junk expiry", "42.soon." + string(s.mac(nil, "42.soon"))},
		{"four parts", "42.1.2." + string(s.mac(nil, "42.1.2"))},
		{"missing expiry", "42." + string(s.mac(nil, "42"))},
		{"mac only", mac},
		{"with spaces", " " + good},
		{"trailing newline", good + "\n"},
	}
	for _, tt := range tests {
		u, err := s.Verify(tt.tok, tokenNow)
		if !errors.Is(err, ErrUnauthorized) || u != 0 {
			t.Errorf("%s: Verify(%q) = %d, %v; want ErrUnauthorized", tt.name, tt.tok, u, err)
		}
	}
}

func FuzzVerify(f *testing.F) {
	s := NewSigner(testSecret)
	f.Add(s.Sign(42, tokenNow.Add(time.Hour)))
	f.Add(s.Sign(0, tokenNow.Add(time.Hour)))
	f.Add(s.Sign(-1, tokenNow))
	f.Add("")
	f.Add(".")
	f.Add("a.b")
	f.Add("x.y.z")
	f.Add("42.99999999999999999999.mac")
	f.Add("\xff.\x00.")
	f.Fuzz(func(t *testing.T, tok string) {
		u, err := s.Verify(tok, tokenNow)
		switch {
		case err == nil:
			if u <= 0 {
				t.Fatalf("Verify(%q) = %d with no error", tok, u)
			}
			// Only a token this Signer made can verify.
			if !strings.HasSuffix(tok, "."+string(s.mac(nil, tok[:strings.LastIndexByte(tok, '.')]))) {
				t.Fatalf("Verify(%q) accepted a token without its MAC", tok)
			}
		case !errors.Is(err, ErrUnauthorized) && !errors.Is(err, ErrTokenExpired):
			t.Fatalf("Verify(%q) = %v, want ErrUnauthorized or ErrTokenExpired", tok, err)
		}
	})
}

// TestSignGolden: a token's wire form is fixed (routers of two versions
// verify each other's tokens during an upgrade).
func TestSignGolden(t *testing.T) {
	s := NewSigner([]byte("golden-secret"))
	tok := s.Sign(42, time.Unix(1_800_000_000, 0))
	if want := "42.1800000000.h_bCOfEeQCr-LvHI3PP2giX4ODax6DtVGmyVdHuwANI"; tok != want {
		t.Errorf("Sign = %q, want %q", tok, want)
	}
	if u, err := s.Verify(tok, time.Unix(1_799_999_999, 0)); err != nil || u != 42 {
		t.Errorf("Verify(golden) = %d, %v", u, err)
	}
}
