// Package webhook is the wire format of hongbao's webhooks, for the
// settler that sends them and for receivers: the event JSON, the
// Stripe-style signature header (Sign) and its check (Verify). It imports
// nothing of hongbao's, so a receiver written in Go can use it alone.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header is the request header that carries the signature:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" under the secret>".
const Header = "Hongbao-Signature"

// Tolerance is how far from the receiver's clock a signature's time may
// be before Verify refuses it: it bounds how long a captured request can
// be replayed. A redelivery is signed anew, so it never ages past it.
const Tolerance = 5 * time.Minute

// Event is one webhook event, the body of one POST.
type Event struct {
	// ID is the same for every delivery of the event: receivers drop
	// duplicates by it (delivery is at least once).
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt string          `json:"created_at"` // RFC 3339, UTC, milliseconds: when its change committed
	Data      json.RawMessage `json:"data"`       // data.packet is the packet's ID; see the README for each type
}

// Sign returns the signature header's value for body sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

func mac(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	ErrMalformed = errors.New("webhook: malformed signature header")
	ErrTooOld    = errors.New("webhook: signature time outside the tolerance")
	ErrMismatch  = errors.New("webhook: signature does not match the body")
)

// Verify checks header (the Hongbao-Signature value) against body, the
// request's raw bytes, at now: some v1 signature must be body's under
// secret (several v1 entries are allowed, for a secret's rotation), and its
// time t within tolerance of now (Tolerance when tolerance is 0).
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance == 0 {
		tolerance = Tolerance
	}
	var ts string
	var sigs []string
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
			return ErrMalformed
		case k == "t":
			ts = v
		case k == "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrMalformed
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: %s from now", ErrTooOld, d.Round(time.Second))
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return ErrMismatch
}
