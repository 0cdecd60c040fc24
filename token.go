package hongbao

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// Signer mints and verifies user tokens: "<user>.<unix expiry>.<mac>", the
// MAC an HMAC-SHA256 of the first two parts under a secret.
type Signer struct{ secret []byte }

// NewSigner returns a Signer for secret.
func NewSigner(secret []byte) *Signer { return &Signer{secret: secret} }

// Sign returns a token for user valid until exp.
func (s *Signer) Sign(user UserID, exp time.Time) string {
	body := user.String() + "." + strconv.FormatInt(exp.Unix(), 10)
	return body + "." + s.mac(body)
}

// Verify returns the user of a valid, unexpired token.
func (s *Signer) Verify(token string, now time.Time) (UserID, error) {
	i := strings.LastIndexByte(token, '.')
	if i < 0 || !hmac.Equal([]byte(token[i+1:]), []byte(s.mac(token[:i]))) {
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

func (s *Signer) mac(body string) string {
	h := hmac.New(sha256.New, s.secret)
	h.Write([]byte(body))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
