package set

import (
	"net"
	"net/http"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// user authenticates r before any handler acts on it: it reads the body
// once (at most api.MaxBody bytes), checks the router's signature over the
// whole request as this server received it (method, path, query, signed
// headers, the body's hash, this server's address, time and nonce) and
// refuses a nonce it saw within the window. The body is put back for the
// handler. So nobody can reach a server with a made-up user, nor rewrite,
// redirect or replay a request a router signed. A sub-request of a batch
// was authenticated with its batch (handleBatch) and carries its user.
func (s *Server) user(w http.ResponseWriter, r *http.Request) (hongbao.UserID, error) {
	if u, ok := r.Context().Value(batchUser{}).(hongbao.UserID); ok {
		return u, nil // a sub-request of a batch whose signature covered it
	}
	body, err := api.ReadBody(w, r)
	if err != nil {
		return 0, err
	}
	signed, err := s.auth.Verify(r, s.selfAddr(r), body)
	if err != nil {
		return 0, err
	}
	if err := s.nonces.use(signed.Nonce, s.now()); err != nil {
		return 0, err
	}
	api.RestoreBody(r, body)
	return signed.User, nil
}

// selfAddr is the address routers reach this server at: the configured
// one, or else the local address the request's connection came in on
// (what the router dialled, unless a proxy or NAT sits between).
func (s *Server) selfAddr(r *http.Request) string {
	if s.self != "" {
		return s.self
	}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		return a.String()
	}
	return ""
}

// NoncesRemembered is how many signed requests' nonces the server keeps
// to refuse their replay.
func (s *Server) NoncesRemembered() int { return s.nonces.size() }
