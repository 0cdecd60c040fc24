package router

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/router/web"
)

// The page is served when given; the dev sign-in only when turned on,
// minting a token the router then accepts for the typed user.
func TestFaceRoutes(t *testing.T) {
	signer := hongbao.NewSigner([]byte("face-test-secret-0123456789"))
	for _, tc := range []struct {
		name                 string
		page                 http.Handler
		dev                  time.Duration
		wantPage, wantSignIn int
	}{
		{"production", web.Handler(), 0, 200, 404},
		{"dev", web.Handler(), time.Hour, 200, 200},
		{"no page", nil, 0, 404, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := New(Deps{Signer: signer, Now: time.Now, Log: zap.NewNop(), Page: tc.page, DevTokenTTL: tc.dev}).Handler()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			if rec.Code != tc.wantPage {
				t.Errorf("GET /: %d, want %d", rec.Code, tc.wantPage)
			}
			rec = httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/dev/token", strings.NewReader(`{"user":"42"}`)))
			if rec.Code != tc.wantSignIn {
				t.Fatalf("POST /dev/token: %d %s, want %d", rec.Code, rec.Body, tc.wantSignIn)
			}
			if rec.Code == 200 {
				tok := between(rec.Body.String(), `"token":"`, `"`)
				if u, err := signer.Verify(tok, time.Now()); err != nil || u != 42 {
					t.Errorf("the dev token is for user %v (%v), want 42", u, err)
				}
			}
		})
	}
	h := New(Deps{Signer: signer, Now: time.Now, Log: zap.NewNop(), DevTokenTTL: time.Hour}).Handler()
	for _, body := range []string{`{"user":"0"}`, `{"user":"abc"}`, `{"user":42}`, `nope`} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", "/dev/token", strings.NewReader(body)))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("POST /dev/token %s: %d %s, want 400", body, rec.Code, rec.Body)
		}
	}
}

func between(s, from, to string) string {
	_, s, _ = strings.Cut(s, from)
	s, _, _ = strings.Cut(s, to)
	return s
}
