package api

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
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
	HeaderTime     = "X-Hb-Time"      // Unix milliseconds of the signature
	HeaderNonce    = "X-Hb-Nonce"     // 16 random bytes, base64url: one use only
	HeaderSig      = "X-Hb-Sig"
)

// Window bounds how far a signature's time may be from the server's clock,
// either way. A server keeps every nonce it accepted for at least twice the
// window, so a captured request can be used once at most: by its sender.
const Window = 10 * time.Second

// signedHeaders are the headers a server acts on besides the signature's
// own: each is covered by the MAC and may appear at most once.
var signedHeaders = []string{HeaderUser, HeaderPacketID, "Idempotency-Key", "Content-Type"}

// macVersion names the MAC's layout, so a change of layout can never verify
// an old signature.
const macVersion = "hb-internal-v2"

// Internal signs and verifies router -> SET server requests with a shared
// secret. The MAC binds the whole request: method, target server, path,
// query, the signed headers, a SHA-256 of the body, the time and a nonce.
// So a client cannot reach a server with a made-up user, and whoever sees
// router -> server traffic can neither rewrite a request, nor send it to
// another server, nor (with the server's nonce memory) send it again.
type Internal struct {
	now  func() time.Time
	macs *hongbao.MACs
}

// NewInternal returns an Internal for secret.
func NewInternal(secret []byte, now func() time.Time) *Internal {
	return &Internal{now: now, macs: hongbao.NewMACs(secret)}
}

// Signed is what a valid signature vouches for.
type Signed struct {
	User  hongbao.UserID
	Nonce [16]byte
	At    time.Time
}

// Sign marks r as sent by a router on behalf of user to the server r.URL.Host.
// It reads the body through r.GetBody (set by http.NewRequest for in-memory
// bodies), so r can still be sent. Every attempt at a server must be signed
// anew: a fresh nonce, and its own target.
func (a *Internal) Sign(r *http.Request, user hongbao.UserID) error {
	body, err := bodyOf(r)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	a.sign(r, user, body)
	return nil
}

// sign sets the signature headers of r, whose body is body, for user (0:
// none, a batch).
func (a *Internal) sign(r *http.Request, user hongbao.UserID, body []byte) {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails (Go 1.24+)
	if user != 0 {
		r.Header.Set(HeaderUser, user.String())
	} else {
		r.Header.Del(HeaderUser)
	}
	r.Header.Set(HeaderTime, strconv.FormatInt(a.now().UnixMilli(), 10))
	r.Header.Set(HeaderNonce, base64.RawURLEncoding.EncodeToString(nonce[:]))
	sum := sha256.Sum256(body)
	var mac [sha256.Size]byte
	r.Header.Set(HeaderSig, base64.RawURLEncoding.EncodeToString(a.mac(mac[:0], r, r.URL.Host, sum[:])))
}

// bodyOf returns a copy of r's body without consuming it.
func bodyOf(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.GetBody == nil {
		return nil, fmt.Errorf("request body of %s %s cannot be read twice", r.Method, r.URL.Path)
	}
	rc, err := r.GetBody()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// Verify checks the signature of r as received by the server reached as
// self (the host:port routers send to), with body the request's whole body.
// It does not check the nonce against earlier requests: the server's nonce
// memory does, after Verify.
func (a *Internal) Verify(r *http.Request, self string, body []byte) (Signed, error) {
	s, err := a.verify(r, self, body)
	if err != nil {
		return Signed{}, err
	}
	if s.User, err = hongbao.ParseUserID(r.Header.Get(HeaderUser)); err != nil {
		return Signed{}, fmt.Errorf("user: %w", ErrForbidden)
	}
	return s, nil
}

// verify checks the MAC, the time and the form of the nonce; the user
// header is the caller's to read.
func (a *Internal) verify(r *http.Request, self string, body []byte) (Signed, error) {
	for _, h := range append([]string{HeaderTime, HeaderNonce, HeaderSig}, signedHeaders...) {
		if len(r.Header.Values(h)) > 1 {
			return Signed{}, fmt.Errorf("header %s repeated: %w", h, ErrForbidden)
		}
	}
	// Compared as text: base64 decoders forgive stray bits and newlines,
	// and one request must have one signature.
	sum := sha256.Sum256(body)
	var mac [sha256.Size]byte
	var want [64]byte
	if !hmac.Equal([]byte(r.Header.Get(HeaderSig)), base64.RawURLEncoding.AppendEncode(want[:0], a.mac(mac[:0], r, self, sum[:]))) {
		return Signed{}, fmt.Errorf("bad or no signature: %w", ErrForbidden)
	}
	// The MAC is good, so the remaining headers are the router's own.
	ms, err := strconv.ParseInt(r.Header.Get(HeaderTime), 10, 64)
	if err != nil {
		return Signed{}, fmt.Errorf("time: %w", ErrForbidden)
	}
	s := Signed{At: time.UnixMilli(ms)}
	if d := a.now().Sub(s.At); d > Window || d < -Window {
		return Signed{}, fmt.Errorf("signed %v from now, outside the window: %w", d, ErrForbidden)
	}
	n, err := base64.RawURLEncoding.Strict().DecodeString(r.Header.Get(HeaderNonce))
	if err != nil || len(n) != len(s.Nonce) {
		return Signed{}, fmt.Errorf("nonce: %w", ErrForbidden)
	}
	copy(s.Nonce[:], n)
	return s, nil
}

// mac covers everything a server acts on: every field is length-prefixed,
// so no two requests share an input. It appends the MAC to dst.
func (a *Internal) mac(dst []byte, r *http.Request, target string, bodySum []byte) []byte {
	return a.macs.Append(dst, func(in []byte) []byte {
		for _, f := range []string{macVersion, r.Method, target, r.URL.EscapedPath(), r.URL.RawQuery,
			r.Header.Get(HeaderTime), r.Header.Get(HeaderNonce)} {
			in = appendField(in, f)
		}
		for _, k := range signedHeaders {
			in = appendField(in, r.Header.Get(k))
		}
		return appendField(in, string(bodySum))
	})
}

// appendField appends f, prefixed with its length, to in.
func appendField(in []byte, f string) []byte {
	return append(binary.BigEndian.AppendUint32(in, uint32(len(f))), f...)
}

// RestoreBody gives r the body a server already read, for its handler.
func RestoreBody(r *http.Request, body []byte) {
	r.Body = io.NopCloser(bytes.NewReader(body))
}

// Refusals of internal requests.
var (
	// ErrForbidden answers a request to a SET server that no router signed,
	// or whose signature does not cover it as received.
	ErrForbidden = &hongbao.Error{Code: "forbidden", Message: "SET servers only take requests from a router"}
	// ErrReplayed answers a signed request whose nonce the server has seen.
	ErrReplayed = &hongbao.Error{Code: "replayed", Message: "this signed request was already received"}
)
