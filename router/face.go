package router

import (
	"encoding/json"
	"net/http"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// face registers what the router serves people beside the API: the
// red-packet page, and in a dev cluster the page's sign-in and top-up.
func (rt *Router) face(mux *http.ServeMux) {
	if rt.page != nil {
		mux.Handle("GET /{$}", rt.page)
		mux.Handle("GET /app/", rt.page)
	}
	if rt.devTTL > 0 {
		mux.HandleFunc("POST /dev/token", rt.handleDevToken)
		mux.HandleFunc("POST /v1/dev/topup", rt.authed(rt.handleMe))
	}
}

// devTokenJSON is the body and the answer of POST /dev/token.
type devTokenJSON struct {
	User  string `json:"user"`
	Token string `json:"token,omitempty"`
}

// handleDevToken mints a token for the user ID in the body, so the page
// can sign in as anyone in a dev cluster (what hbctl token does).
func (rt *Router) handleDevToken(w http.ResponseWriter, r *http.Request) {
	var in devTokenJSON
	body, err := api.ReadBody(w, r)
	if err == nil {
		if json.Unmarshal(body, &in) != nil {
			err = &hongbao.InvalidError{Code: "malformed_json", Message: `want {"user":"<decimal user ID>"}`}
		}
	}
	var user hongbao.UserID
	if err == nil {
		user, err = hongbao.ParseUserID(in.User)
	}
	if err != nil {
		api.WriteProblem(w, err, api.RequestID(r.Context()))
		return
	}
	tok := rt.tokens.signer.Sign(user, rt.now().Add(rt.devTTL))
	api.WriteJSON(w, http.StatusOK, devTokenJSON{User: user.String(), Token: tok})
}
