package webhook_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hongbao-dev/hongbao/api/webhook"
)

var (
	secret = []byte("whsec_0123456789abcdef")
	body   = []byte(`{"id":"packet.opened:291390042931703809:42","type":"packet.opened","created_at":"2026-03-15T04:00:00.123Z","data":{"packet":"291390042931703809","user":"42","amount":100}}`)
	signed = time.Unix(1773547200, 0)
)

// TestSignGolden pins the header for a fixed secret, time and body
// (computed independently: printf '%s.%s' t body | openssl dgst -sha256 -hmac secret).
func TestSignGolden(t *testing.T) {
	for _, tc := range []struct {
		secret, body string
		at           int64
		want         string
	}{
		{string(secret), string(body), 1773547200, "t=1773547200,v1=" + goldenBody},
		{"k", "", 0, "t=0,v1=" + goldenEmpty},
	} {
		if got := webhook.Sign([]byte(tc.secret), time.Unix(tc.at, 0), []byte(tc.body)); got != tc.want {
			t.Errorf("Sign(%q, %d, %q) = %s, want %s", tc.secret, tc.at, tc.body, got, tc.want)
		}
	}
}

// TestVerify: a fresh signature of the body passes; a tampered body, the
// wrong secret, a time outside the tolerance either way or a malformed
// header does not; a second v1 (a rotated secret) may match.
func TestVerify(t *testing.T) {
	h := webhook.Sign(secret, signed, body)
	tampered := append([]byte{}, body...)
	tampered[len(tampered)-3] = '9' // amount 100 -> 190
	for _, tc := range []struct {
		name      string
		secret    []byte
		header    string
		body      []byte
		now       time.Time
		tolerance time.Duration
		want      error
	}{
		{"fresh", secret, h, body, signed.Add(time.Second), 0, nil},
		{"at the tolerance", secret, h, body, signed.Add(webhook.Tolerance), 0, nil},
		{"too old", secret, h, body, signed.Add(webhook.Tolerance + time.Second), 0, webhook.ErrTooOld},
		{"from the future", secret, h, body, signed.Add(-webhook.Tolerance - time.Second), 0, webhook.ErrTooOld},
		{"own tolerance", secret, h, body, signed.Add(time.Hour), 2 * time.Hour, nil},
		{"tampered body", secret, h, tampered, signed, 0, webhook.ErrMismatch},
		{"wrong secret", []byte("another secret!!"), h, body, signed, 0, webhook.ErrMismatch},
		{"rotated secret", []byte("another secret!!"), h + ",v1=" + webhook.Sign([]byte("another secret!!"), signed, body)[len("t=1773547200,v1="):], body, signed, 0, nil},
		{"time changed", secret, "t=1773547201" + h[len("t=1773547200"):], body, signed, 0, webhook.ErrMismatch},
		{"no v1", secret, "t=1773547200", body, signed, 0, webhook.ErrMalformed},
		{"no t", secret, h[len("t=1773547200,"):], body, signed, 0, webhook.ErrMalformed},
		{"garbage", secret, "nonsense", body, signed, 0, webhook.ErrMalformed},
		{"empty", secret, "", body, signed, 0, webhook.ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := webhook.Verify(tc.secret, tc.header, tc.body, tc.now, tc.tolerance)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

// The golden HMACs, computed with openssl, not with this package.
const (
	goldenBody  = "1446e7129526e8a096faed39e37419bc60e9919f6073fcc8b8ea474c1c0c8662"
	goldenEmpty = "6b4a4b8b3c40f1e8f53a3d36682e5f99f7ad2ac1df1c93dfe336f329167641e7"
)
