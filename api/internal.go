package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// Headers of router -> server requests. The router has verified the user's
// token; the server trusts these headers only under a valid signature.
const (
	HeaderUser     = "X-Hb-User"
	HeaderPacketID = "X-Hb-Packet-Id" // the ID the router minted for a send
	HeaderTime     = "X-Hb-Time"
	HeaderSig      = "X-Hb-Sig"
)

// maxSkew bounds how old a signed request may be, so a captured request
// cannot be replayed later.
const maxSkew = 30 * time.Second

// Internal signs and verifies router -> SET server requests with a shared
// secret, so a client cannot reach a server directly with a made-up user.
type Internal struct {
	secret []byte
	now    func() time.Time
}

// NewInternal returns an Internal for secret.
func NewInternal(secret []byte, now func() time.Time) *Internal {
	return &Internal{secret: secret, now: now}
}

// Sign marks r as sent by a router on behalf of user.
func (a *Internal) Sign(r *http.Request, user hongbao.UserID) {
	r.Header.Set(HeaderUser, user.String())
	r.Header.Set(HeaderTime, strconv.FormatInt(a.now().Unix(), 10))
	r.Header.Set(HeaderSig, a.mac(r))
}

// Verify returns the user of a request signed by a router.
func (a *Internal) Verify(r *http.Request) (hongbao.UserID, error) {
	sig := r.Header.Get(HeaderSig)
	if sig == "" || !hmac.Equal([]byte(sig), []byte(a.mac(r))) {
		return 0, ErrForbidden
	}
	ts, err := strconv.ParseInt(r.Header.Get(HeaderTime), 10, 64)
	if err != nil {
		return 0, ErrForbidden
	}
	if d := a.now().Sub(time.Unix(ts, 0)); d > maxSkew || d < -maxSkew {
		return 0, ErrForbidden
	}
	u, err := hongbao.ParseUserID(r.Header.Get(HeaderUser))
	if err != nil {
		return 0, ErrForbidden
	}
	return u, nil
}

// mac covers everything a server acts on besides the body.
func (a *Internal) mac(r *http.Request) string {
	h := hmac.New(sha256.New, a.secret)
	for _, s := range []string{r.Method, r.URL.Path, r.Header.Get(HeaderUser), r.Header.Get(HeaderTime),
		r.Header.Get(HeaderPacketID), r.Header.Get("Idempotency-Key")} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// ErrForbidden answers a request to a SET server that no router signed.
var ErrForbidden = &hongbao.Error{Code: "forbidden", Message: "SET servers only take requests from a router"}
