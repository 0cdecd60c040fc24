package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

var internalSecret = []byte("internal-test-secret-0123456789")

const target = "10.0.0.7:8081"

// signedSend returns a send to target signed at signedAt, and its body.
func signedSend(t testing.TB, signedAt time.Time) (*http.Request, []byte) {
	t.Helper()
	body := []byte(`{"total":1000,"count":10}`)
	r, err := http.NewRequest(http.MethodPost, "http://"+target+"/v1/packets?x=1", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", "order-1")
	r.Header.Set(HeaderPacketID, "165143170254970885")
	if err := NewInternal(internalSecret, func() time.Time { return signedAt }).Sign(r, 42); err != nil {
		t.Fatal(err)
	}
	return r, body
}

// received is r as a server parses it off the wire.
func received(t testing.TB, r *http.Request) *http.Request {
	t.Helper()
	in := httptest.NewRequest(r.Method, r.URL.RequestURI(), nil)
	in.Header = r.Header.Clone()
	return in
}

func TestInternalVerify(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		signed time.Time
		change func(r *http.Request, body []byte) (self string, _ []byte)
		ok     bool
	}{
		{"as signed", now, func(r *http.Request, b []byte) (string, []byte) { return target, b }, true},
		{"9 s old", now.Add(-9 * time.Second), func(r *http.Request, b []byte) (string, []byte) { return target, b }, true},
		{"11 s old", now.Add(-11 * time.Second), func(r *http.Request, b []byte) (string, []byte) { return target, b }, false},
		{"11 s ahead", now.Add(11 * time.Second), func(r *http.Request, b []byte) (string, []byte) { return target, b }, false},
		{"body rewritten", now, func(r *http.Request, b []byte) (string, []byte) {
			return target, []byte(`{"total":20000,"count":1}`)
		}, false},
		{"body dropped", now, func(r *http.Request, b []byte) (string, []byte) { return target, nil }, false},
		{"another server", now, func(r *http.Request, b []byte) (string, []byte) { return "10.0.0.8:8081", b }, false},
		{"another method", now, func(r *http.Request, b []byte) (string, []byte) { r.Method = http.MethodPut; return target, b }, false},
		{"another path", now, func(r *http.Request, b []byte) (string, []byte) {
			r.URL.Path, r.URL.RawPath = "/v1/packets/1/open", ""
			return target, b
		}, false},
		{"another query", now, func(r *http.Request, b []byte) (string, []byte) { r.URL.RawQuery = "x=2"; return target, b }, false},
		{"another user", now, func(r *http.Request, b []byte) (string, []byte) { r.Header.Set(HeaderUser, "43"); return target, b }, false},
		{"another packet ID", now, func(r *http.Request, b []byte) (string, []byte) {
			r.Header.Set(HeaderPacketID, "165143170254970886")
			return target, b
		}, false},
		{"another Idempotency-Key", now, func(r *http.Request, b []byte) (string, []byte) {
			r.Header.Set("Idempotency-Key", "order-2")
			return target, b
		}, false},
		{"Idempotency-Key dropped", now, func(r *http.Request, b []byte) (string, []byte) {
			r.Header.Del("Idempotency-Key")
			return target, b
		}, false},
		{"another Content-Type", now, func(r *http.Request, b []byte) (string, []byte) {
			r.Header.Set("Content-Type", "text/plain")
			return target, b
		}, false},
		{"another nonce", now, func(r *http.Request, b []byte) (string, []byte) {
			r.Header.Set(HeaderNonce, "AAAAAAAAAAAAAAAAAAAAAA")
			return target, b
		}, false},
		{"time moved", now, func(r *http.Request, b []byte) (string, []byte) {
			r.Header.Set(HeaderTime, "1777636800001")
			return target, b
		}, false},
		{"user header twice", now, func(r *http.Request, b []byte) (string, []byte) {
			r.Header.Add(HeaderUser, "43")
			return target, b
		}, false},
		{"no signature", now, func(r *http.Request, b []byte) (string, []byte) { r.Header.Del(HeaderSig); return target, b }, false},
	}
	in := NewInternal(internalSecret, func() time.Time { return now })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sent, body := signedSend(t, tt.signed)
			r := received(t, sent)
			self, body := tt.change(r, body)
			s, err := in.Verify(r, self, body)
			if tt.ok {
				if err != nil || s.User != 42 || !s.At.Equal(tt.signed) || s.Nonce == [16]byte{} {
					t.Fatalf("Verify = %+v, %v; want user 42 signed at %v", s, err, tt.signed)
				}
				return
			}
			if !errors.Is(err, ErrForbidden) || Status(err) != http.StatusForbidden || hongbao.Code(err) != "forbidden" {
				t.Fatalf("Verify = %+v, %v; want 403 forbidden", s, err)
			}
		})
	}
}

// TestInternalSignFresh: every signature has its own nonce, so two
// attempts of one request are two requests to the servers.
func TestInternalSignFresh(t *testing.T) {
	now := time.Now()
	a, _ := signedSend(t, now)
	b, _ := signedSend(t, now)
	if a.Header.Get(HeaderNonce) == b.Header.Get(HeaderNonce) || a.Header.Get(HeaderSig) == b.Header.Get(HeaderSig) {
		t.Errorf("two signatures share nonce %q / signature %q", a.Header.Get(HeaderNonce), a.Header.Get(HeaderSig))
	}
}

// TestInternalSignKeepsBody: signing reads the body without consuming it.
func TestInternalSignKeepsBody(t *testing.T) {
	r, body := signedSend(t, time.Now())
	got := new(bytes.Buffer)
	if _, err := got.ReadFrom(r.Body); err != nil || !bytes.Equal(got.Bytes(), body) {
		t.Errorf("body after Sign = %q, %v; want %q", got, err, body)
	}
}

// FuzzInternalVerify: whatever a client puts in the signature headers and
// body, Verify accepts exactly the requests whose signature is the MAC of
// what they say, with a sane user, time and nonce, and refuses the rest
// with 403 forbidden; it never panics.
func FuzzInternalVerify(f *testing.F) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	good, body := signedSend(f, now)
	f.Add(good.Header.Get(HeaderUser), good.Header.Get(HeaderTime), good.Header.Get(HeaderNonce), good.Header.Get(HeaderSig), body)
	f.Add("42", "1777636800000", "", "", []byte{})
	f.Add("-1", "x", "%%%", "AAAA", []byte("{}"))
	f.Add("0042", "99999999999999999999", "AAAAAAAAAAAAAAAAAAAAAA", good.Header.Get(HeaderSig), []byte(nil))
	in := NewInternal(internalSecret, func() time.Time { return now })
	f.Fuzz(func(t *testing.T, user, ts, nonce, sig string, b []byte) {
		r := received(t, good)
		r.Header.Set(HeaderUser, user)
		r.Header.Set(HeaderTime, ts)
		r.Header.Set(HeaderNonce, nonce)
		r.Header.Set(HeaderSig, sig)
		s, err := in.Verify(r, target, b)
		sum := sha256.Sum256(b)
		signed := sig == base64.RawURLEncoding.EncodeToString(in.mac(nil, r, target, sum[:]))
		u, uerr := hongbao.ParseUserID(user)
		ms, terr := strconv.ParseInt(ts, 10, 64)
		n, nerr := base64.RawURLEncoding.Strict().DecodeString(nonce)
		sane := uerr == nil && terr == nil && now.Sub(time.UnixMilli(ms)).Abs() <= Window && nerr == nil && len(n) == 16
		switch {
		case err == nil && (!signed || !sane):
			t.Fatalf("Verify accepted user %q time %q nonce %q sig %q body %q (signed %v, sane %v)", user, ts, nonce, sig, b, signed, sane)
		case err == nil && s.User != u:
			t.Fatalf("Verify = user %s, want %s", s.User, u)
		case err != nil && signed && sane:
			t.Fatalf("Verify refused a signed request: %v", err)
		case err != nil && !errors.Is(err, ErrForbidden):
			t.Fatalf("Verify = %v, want forbidden", err)
		}
	})
}

// TestMACGolden: the internal signature's input and MAC are fixed (routers
// and servers of two versions sign for each other during an upgrade).
func TestMACGolden(t *testing.T) {
	in := NewInternal([]byte("golden-internal-secret"), time.Now)
	r := httptest.NewRequest(http.MethodPost, "http://10.0.0.1:8081/v1/packets/7/open?x=1", nil)
	r.Header.Set(HeaderTime, "1800000000000")
	r.Header.Set(HeaderNonce, "AAAAAAAAAAAAAAAAAAAAAA")
	r.Header.Set(HeaderUser, "42")
	sum := sha256.Sum256([]byte(`{"a":1}`))
	got := base64.RawURLEncoding.EncodeToString(in.mac(nil, r, "10.0.0.1:8081", sum[:]))
	if want := "nHW93clbWLzFw2SNwSmcK9-sB_8XzKHmheAGL_ZRLvQ"; got != want {
		t.Errorf("mac = %q, want %q", got, want)
	}
}
