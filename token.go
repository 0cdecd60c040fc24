package hongbao

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// Signer mints and verifies user tokens: "<user>.<unix expiry>.<mac>", the
// MAC an HMAC-SHA256 of the first two parts under a secret, in unpadded
// base64url.
type Signer struct{ macs *MACs }

// NewSigner returns a Signer for secret.
func NewSigner(secret []byte) *Signer { return &Signer{macs: NewMACs(secret)} }

// Sign returns a token for user valid until exp.
func (s *Signer) Sign(user UserID, exp time.Time) string {
	body := user.String() + "." + strconv.FormatInt(exp.Unix(), 10)
	return body + "." + string(s.mac(nil, body))
}

// Verify returns the user of a valid, unexpired token.
func (s *Signer) Verify(token string, now time.Time) (UserID, error) {
	i := strings.LastIndexByte(token, '.')
	var buf [64]byte
	if i < 0 || !equalText(token[i+1:], s.mac(buf[:0], token[:i])) {
		return 0, ErrUnauthorized
	}
	user, exp, ok := strings.Cut(token[:i], ".")
	if !ok {
		return 0, ErrUnauthorized
	}
	u, err := ParseUserID(user)
	if err != nil {
		return 0, ErrUnauthorized
	}
	e, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return 0, ErrUnauthorized
	}
	if !now.Before(time.Unix(e, 0)) {
		return 0, ErrTokenExpired
	}
	return u, nil
}

// mac appends body's MAC, as the token carries it, to dst.
func (s *Signer) mac(dst []byte, body string) []byte {
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.AppendEncode(dst, s.macs.Append(sum[:0], func(in []byte) []byte { return append(in, body...) }))
}

// equalText compares a token's MAC with the one computed, as text (a
// base64 decoder forgives stray bits: one token has one MAC), in time
// independent of where they differ.
func equalText(got string, want []byte) bool {
	if len(got) != len(want) {
		return false
	}
	var v byte
	for i := range len(got) {
		v |= got[i] ^ want[i]
	}
	return v == 0
}
