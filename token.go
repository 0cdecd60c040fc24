package hongbao

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Signer mints and verifies user tokens: "<user>.<unix expiry>.<mac>", the
// MAC an HMAC-SHA256 of the first two parts under a secret, in unpadded
// base64url.
type Signer struct {
	secret []byte
	// macs keeps HMACs under secret for reuse (*macState): a router
	// verifies a token per request it has not seen, and a new HMAC costs
	// its key's two hash blocks and five allocations.
	macs sync.Pool
}

// macState is an HMAC under a Signer's secret and its scratch space.
type macState struct {
	h   hash.Hash
	in  []byte
	sum [sha256.Size]byte
}

// NewSigner returns a Signer for secret.
func NewSigner(secret []byte) *Signer { return &Signer{secret: secret} }

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
	m, _ := s.macs.Get().(*macState)
	if m == nil {
		m = &macState{h: hmac.New(sha256.New, s.secret)}
	}
	m.h.Reset()
	m.in = append(m.in[:0], body...)
	m.h.Write(m.in)
	dst = base64.RawURLEncoding.AppendEncode(dst, m.h.Sum(m.sum[:0]))
	if cap(m.in) > maxKeptInput {
		m.in = nil // a huge token's copy is not kept
	}
	s.macs.Put(m)
	return dst
}

// maxKeptInput bounds the scratch space a pooled HMAC keeps.
const maxKeptInput = 1 << 10

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
