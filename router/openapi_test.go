package router

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// muxRoute is a route the router's Handler registers.
var muxRoute = regexp.MustCompile(`mux\.HandleFunc\("([A-Z]+ /[^"]*)"`)

// The routes Handler registers are exactly the operations of openapi.json
// (the catch-all "/" is the spec's x-unmatched).
func TestOpenAPIRoutesMatchHandler(t *testing.T) {
	src, err := os.ReadFile("router.go")
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, m := range muxRoute.FindAllStringSubmatch(string(src), -1) {
		routes = append(routes, m[1])
	}
	slices.Sort(routes)
	spec, err := api.ParseSpec()
	if err != nil {
		t.Fatal(err)
	}
	if ops := spec.Operations(); !slices.Equal(routes, ops) {
		t.Fatalf("router.go registers\n  %v\nopenapi.json documents\n  %v", routes, ops)
	}
}

// Every operation answers, without a token, what the spec says it may:
// 401 unauthorized for the API, 200 for the probes and the spec itself,
// a path the router does not have answers 404 not_found, and a path it has
// asked with another method 405 method_not_allowed naming its methods.
func TestOpenAPIAnswersWithoutToken(t *testing.T) {
	rt := New(Deps{Signer: hongbao.NewSigner([]byte("openapi-test-secret-0123456789")), Now: time.Now, Log: zap.NewNop()})
	h := rt.Handler()
	spec, err := api.ParseSpec()
	if err != nil {
		t.Fatal(err)
	}
	paths := append(spec.Operations(), "GET /v2/nothing", "DELETE /v1/packets/1", "GET /v1/packets", "PUT /v1/ping")
	for _, op := range paths {
		method, path, _ := strings.Cut(op, " ")
		path = strings.ReplaceAll(path, "{id}", "123")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		code := problemCode(t, rec.Result())
		if err := spec.Check(method, path, rec.Code, code); err != nil {
			t.Error(err)
		}
		want := http.StatusUnauthorized
		if !strings.HasPrefix(path, "/v1/") || method == "DELETE" {
			want = http.StatusOK
		}
		var allow []string
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			if spec.Match(m, path) != "" {
				allow = append(allow, m)
				if m == "GET" {
					allow = append(allow, "HEAD")
				}
			}
		}
		if spec.Match(method, path) == "" {
			want = http.StatusNotFound
			if len(allow) > 0 {
				want = http.StatusMethodNotAllowed
			}
		}
		if rec.Code != want {
			t.Errorf("%s %s: %d %q, want %d", method, path, rec.Code, code, want)
		}
		if got := rec.Header().Get("Allow"); want == http.StatusMethodNotAllowed && got != strings.Join(allow, ", ") {
			t.Errorf("%s %s: Allow %q, want %q", method, path, got, strings.Join(allow, ", "))
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/openapi.json", nil))
	if rec.Body.String() != api.OpenAPI() || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("GET /openapi.json: %s, %d bytes, want the embedded spec as application/json", rec.Header().Get("Content-Type"), rec.Body.Len())
	}
}

func problemCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		return ""
	}
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`"code":"([a-z_]+)"`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("problem without a code: %s", body)
	}
	return string(m[1])
}
