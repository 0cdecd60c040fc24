package api

import (
	"net/http"
	"strings"

	hongbao "github.com/hongbao-dev/hongbao"
)

// routedMethods are the methods a path may be served for: what an Allow
// header can name.
var routedMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// ErrMethodNotAllowed is the refusal of a method the path is not served
// for (the answer's Allow header names those it is).
var ErrMethodNotAllowed = &hongbao.Error{Code: "method_not_allowed", Message: "the endpoint does not take this method"}

// errNoEndpoint is the refusal of a path nothing serves.
var errNoEndpoint = &hongbao.Error{Code: "not_found", Message: "no such endpoint"}

// Unrouted is the handler of mux's catch-all pattern "/": a request no
// other pattern took. Go's mux answers a method it has no pattern for with
// its own plain-text 405 only when nothing matches, and the catch-all
// matches everything, so the difference is made here: a path mux serves for
// other methods is 405 method_not_allowed with an Allow header, any other
// 404 not_found, both as problems.
func Unrouted(mux *http.ServeMux) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if allow := allowed(mux, r); allow != "" {
			w.Header().Set("Allow", allow)
			WriteProblem(w, ErrMethodNotAllowed, RequestID(r.Context()))
			return
		}
		WriteProblem(w, errNoEndpoint, RequestID(r.Context()))
	}
}

// allowed lists the methods mux serves r's path for other than through
// its catch-all, comma-separated (empty: none).
func allowed(mux *http.ServeMux, r *http.Request) string {
	var ms []string
	probe := *r
	for _, m := range routedMethods {
		probe.Method = m
		if _, pattern := mux.Handler(&probe); pattern != "" && pattern != "/" {
			ms = append(ms, m)
			if m == http.MethodGet {
				ms = append(ms, http.MethodHead)
			}
		}
	}
	return strings.Join(ms, ", ")
}
