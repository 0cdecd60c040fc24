package router

import (
	"errors"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// TestTokenCacheExpiry: a remembered token stops working at its own
// expiry, exactly as an unremembered one does.
func TestTokenCacheExpiry(t *testing.T) {
	s := hongbao.NewSigner([]byte("secret"))
	c := newTokenCache(s, 8)
	now := time.Unix(1_800_000_000, 0)
	tok := s.Sign(42, now.Add(time.Minute))
	for range 2 { // a miss, then a hit
		if u, err := c.verify(tok, now); err != nil || u != 42 {
			t.Fatalf("verify = %v, %v; want 42", u, err)
		}
	}
	if c.size() != 1 {
		t.Fatalf("%d tokens remembered, want 1", c.size())
	}
	if u, err := c.verify(tok, now.Add(time.Minute-time.Second)); err != nil || u != 42 {
		t.Fatalf("just before expiry: %v, %v", u, err)
	}
	if _, err := c.verify(tok, now.Add(time.Minute)); !errors.Is(err, hongbao.ErrTokenExpired) {
		t.Fatalf("at expiry: %v, want token_expired", err)
	}
	if c.size() != 0 {
		t.Errorf("an expired token is still remembered")
	}
}

// TestTokenCacheRefusesWhatVerifyRefuses: forged, tampered and expired
// tokens are never remembered, and a forged token never matches a
// remembered one that differs in its MAC.
func TestTokenCacheRefusesWhatVerifyRefuses(t *testing.T) {
	s := hongbao.NewSigner([]byte("secret"))
	c := newTokenCache(s, 8)
	now := time.Unix(1_800_000_000, 0)
	good := s.Sign(7, now.Add(time.Hour))
	if _, err := c.verify(good, now); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		hongbao.NewSigner([]byte("other")).Sign(7, now.Add(time.Hour)), // another secret
		good[:len(good)-1] + "A",         // tampered MAC
		s.Sign(7, now.Add(-time.Second)), // expired
		"", "garbage", good + ".",
	} {
		for range 2 {
			if u, err := c.verify(bad, now); err == nil {
				t.Fatalf("verify(%q) = %v, want refused", bad, u)
			}
		}
	}
	if c.size() != 1 {
		t.Errorf("%d tokens remembered, want only the good one", c.size())
	}
}

// TestTokenCacheBounded: never more than max tokens; every token still
// verifies after being evicted.
func TestTokenCacheBounded(t *testing.T) {
	s := hongbao.NewSigner([]byte("secret"))
	c := newTokenCache(s, 16)
	now := time.Unix(1_800_000_000, 0)
	var toks []string
	for i := range 100 {
		toks = append(toks, s.Sign(hongbao.UserID(i+1), now.Add(time.Hour)))
	}
	for round := range 2 {
		for i, tok := range toks {
			if u, err := c.verify(tok, now); err != nil || u != hongbao.UserID(i+1) {
				t.Fatalf("round %d token %d: %v, %v", round, i, u, err)
			}
			if c.size() > 16 {
				t.Fatalf("%d tokens remembered, bound 16", c.size())
			}
		}
	}
}

func BenchmarkTokenVerify(b *testing.B) {
	s := hongbao.NewSigner([]byte("secret"))
	now := time.Unix(1_800_000_000, 0)
	tok := s.Sign(42, now.Add(time.Hour))
	b.Run("signer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = s.Verify(tok, now)
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := newTokenCache(s, tokenCacheSize)
		b.ReportAllocs()
		for b.Loop() {
			_, _ = c.verify(tok, now)
		}
	})
}
