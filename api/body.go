package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strings"

	hongbao "github.com/hongbao-dev/hongbao"
)

// Problems reading a request body: each is the client's doing (or its
// network's), so each is a 4xx with a code of its own.
var (
	ErrBodyTruncated = &hongbao.Error{Code: "truncated_body", Message: "the body ended before its declared length"}
	ErrBodyMalformed = &hongbao.Error{Code: "malformed_body", Message: "the body's transfer encoding is malformed"}
	ErrBodyTimeout   = &hongbao.Error{Code: "body_timeout", Message: "the body did not arrive in time"}
	ErrBodyUnwanted  = &hongbao.InvalidError{Code: "unexpected_body", Field: "body", Message: "must be empty on this endpoint"}
	ErrMediaType     = &hongbao.Error{Code: "unsupported_media_type", Message: "the body must be application/json (UTF-8)"}
)

// ReadBody reads r's whole body, at most MaxBody bytes, and names what went
// wrong reading it.
func ReadBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	return raw, BodyError(err)
}

// BodyError maps an error reading a request body to its problem: too
// large, truncated, too slow, or else malformed (net/http reports a broken
// chunked encoding with unexported errors). nil stays nil.
func BodyError(err error) error {
	var tooBig *http.MaxBytesError
	var ne net.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooBig):
		return ErrBodyTooLarge
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("read body: %v: %w", err, ErrBodyTruncated)
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("read body: %v: %w", err, ErrBodyTimeout)
	}
	return fmt.Errorf("read body: %v: %w", err, ErrBodyMalformed)
}

// NoBody refuses a request to an endpoint without a body that carries one
// anyway: what a client meant by it is unknown, so nothing is done.
func NoBody(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength == 0 {
		return nil
	}
	raw, err := ReadBody(w, r)
	if err != nil {
		return err
	}
	if len(raw) > 0 {
		return ErrBodyUnwanted
	}
	return nil
}

// CheckJSONType refuses a body that does not say it is JSON in UTF-8: a
// missing or other Content-Type, or another charset.
func CheckJSONType(h http.Header) error {
	if len(h.Values("Content-Type")) != 1 {
		return ErrMediaType
	}
	mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return ErrMediaType
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return ErrMediaType
		}
	}
	return nil
}
