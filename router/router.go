package router

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/set/topology"
)

// Router is the public API. It holds no state of its own beyond caches of
// the topology and of server health: any number of routers can run.
type Router struct {
	topo     *topology.Watcher
	health   *Health
	tokens   *tokenCache // verified user tokens
	internal *api.Internal
	minter   *hongbao.Minter
	client   *http.Client
	now      func() time.Time
	log      *zap.Logger
	timeout  time.Duration
	// Abuse limits, per user and route, and per client address.
	open, grab, send *limiter
	maxPerAddress    int
	http             *metrics.HTTP
	page             http.Handler
	devTTL           time.Duration
	refreshed        atomic.Int64  // unix nanos of the last topology refresh a 421 asked for
	coalesce         *coalescer    // nil: one exchange per request
	switchWindow     time.Duration // how long a request follows a switching bucket (switchWindow)
}

// Deps are the Router's collaborators.
type Deps struct {
	Topology *topology.Watcher
	Health   *Health
	Signer   *hongbao.Signer // user tokens
	Internal *api.Internal   // router -> server signatures
	Client   *http.Client    // keep-alive pool to the servers
	Now      func() time.Time
	Log      *zap.Logger
	Timeout  time.Duration // bound on one attempt at a server
	Limits   Limits        // abuse limits; the zero value is none
	HTTP     *metrics.HTTP // measures the API's requests; nil: none
	// Page is the red-packet page (GET / and /app/...); nil: none.
	Page http.Handler
	// DevTokenTTL, when positive, turns on the dev cluster's sign-in
	// (POST /dev/token mints a token for a typed user ID) and top-up
	// (POST /v1/dev/topup). Never in production.
	DevTokenTTL time.Duration
	// Coalescing batches concurrent requests bound for one server; the
	// zero value sends each request alone.
	Coalescing Coalescing
}

// New returns a Router.
func New(d Deps) *Router {
	if d.Timeout <= 0 {
		d.Timeout = 15 * time.Second
	}
	rt := &Router{topo: d.Topology, health: d.Health, tokens: newTokenCache(d.Signer, tokenCacheSize), internal: d.Internal,
		minter: hongbao.NewMinter(d.Now), client: d.Client, now: d.Now, log: d.Log, timeout: d.Timeout,
		open: newLimiter(d.Limits.Open, d.Limits.MaxUsers), grab: newLimiter(d.Limits.Grab, d.Limits.MaxUsers),
		send: newLimiter(d.Limits.Send, d.Limits.MaxUsers), maxPerAddress: d.Limits.MaxPerAddress, http: d.HTTP,
		page: d.Page, devTTL: d.DevTokenTTL, switchWindow: switchWindow}
	if d.Coalescing.Batch > 0 {
		rt.coalesce = newCoalescer(d.Coalescing, d.Timeout, rt.sendBatch)
	}
	return rt
}

// Close stops the router's own goroutines, after its HTTP server has
// stopped taking requests: the batches in flight are answered, or, when
// ctx ends first, cancelled.
func (rt *Router) Close(ctx context.Context) error {
	if rt.coalesce == nil {
		return nil
	}
	return rt.coalesce.close(ctx)
}

// NewClient returns the keep-alive client a router uses towards servers.
func NewClient(conns int) *http.Client {
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          conns * 8,
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 20 * time.Second,
	}
	return &http.Client{Transport: tr}
}

// Handler returns the public API.
func (rt *Router) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/packets", rt.authed(rt.limited(rt.send, rt.handleSend)))
	mux.HandleFunc("POST /v1/packets/{id}/grab", rt.authed(rt.limited(rt.grab, rt.handlePacket)))
	mux.HandleFunc("POST /v1/packets/{id}/open", rt.authed(rt.limited(rt.open, rt.handlePacket)))
	mux.HandleFunc("GET /v1/packets/{id}", rt.authed(rt.handlePacket))
	mux.HandleFunc("GET /v1/me/wallet", rt.authed(rt.handleMe))
	mux.HandleFunc("GET /v1/me/received", rt.authed(rt.handleMe))
	mux.HandleFunc("GET /v1/me/sent", rt.authed(rt.handleMe))
	mux.HandleFunc("GET /v1/me/statement", rt.authed(rt.handleMe))
	mux.HandleFunc("POST /v1/ping", rt.authed(rt.handleMe))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ready\n")) })
	mux.HandleFunc("/", api.Unrouted(mux))
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, api.OpenAPI())
	})
	rt.face(mux)
	return api.Logged(rt.log, rt.http.Wrap(capped(rt.maxPerAddress, mux)))
}

type handler func(w http.ResponseWriter, r *http.Request, user hongbao.UserID) error

func (rt *Router) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		user, err := rt.user(r)
		if err == nil {
			api.AddField(r.Context(), zap.Stringer("user", user))
			err = api.ClientGone(r, h(w, r, user))
		}
		if err != nil {
			api.LogFailure(r.Context(), rt.log, err)
			api.WriteProblem(w, err, api.RequestID(r.Context()))
		}
	}
}

func (rt *Router) user(r *http.Request) (hongbao.UserID, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return 0, hongbao.ErrUnauthorized
	}
	return rt.tokens.verify(tok, rt.now())
}

// handleSend mints the packet's ID, so the bucket (and so the SET) is known
// before any server sees the send. With an Idempotency-Key the bucket comes
// from it, so a retried send meets its first attempt in one database.
func (rt *Router) handleSend(w http.ResponseWriter, r *http.Request, user hongbao.UserID) error {
	if err := api.CheckJSONType(r.Header); err != nil {
		return err
	}
	body, err := api.ReadBody(w, r)
	if err != nil {
		return err
	}
	// Refused here, a bad body costs no ID, no server and no database.
	if _, err := api.DecodeSend(bytes.NewReader(body)); err != nil {
		return err
	}
	err = rt.minter.Mint(user, r.Header.Get("Idempotency-Key"), func(id hongbao.PacketID) error {
		api.AddField(r.Context(), zap.Stringer("packet_id", id))
		resp, err := rt.forward(r, user, id, body, map[string]string{api.HeaderPacketID: id.String()})
		if err != nil {
			return err
		}
		if resp.code == "duplicate_id" {
			return hongbao.ErrDuplicateID // another router minted the same ID: mint again
		}
		resp.write(w)
		return nil
	})
	return err
}

// handlePacket forwards grab, open and detail to the packet's server.
func (rt *Router) handlePacket(w http.ResponseWriter, r *http.Request, user hongbao.UserID) error {
	id, err := hongbao.ParsePacketID(r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := api.NoBody(w, r); err != nil {
		return err
	}
	api.AddField(r.Context(), zap.Stringer("packet_id", id))
	resp, err := rt.forward(r, user, id, nil, nil)
	if err != nil {
		return err
	}
	resp.write(w)
	return nil
}

// handleMe forwards a user's wallet and history reads, which the wallet
// answers from any server, and pings (the no-op that measures the HTTP
// ceiling of router + server); the user ID spreads them over all servers.
func (rt *Router) handleMe(w http.ResponseWriter, r *http.Request, user hongbao.UserID) error {
	if err := api.NoBody(w, r); err != nil {
		return err
	}
	resp, err := rt.forwardTo(r, user, nil, nil, func() []string {
		var all []string
		for _, s := range rt.topo.Current().Sets {
			all = append(all, s.Servers...)
		}
		return Rank(all, uint64(user), rt.health.Healthy)
	})
	if err != nil {
		return err
	}
	resp.write(w)
	return nil
}

// response is a server's answer, read whole so it can be inspected and
// relayed.
type response struct {
	status int
	header http.Header  // of an exchange of its own
	fields []api.Header // of a batch's sub-response (no map to build)
	body   []byte
	code   string // the problem code, if any
}

// get returns the answer's header name (canonical form).
func (p *response) get(name string) string {
	if p.header != nil {
		return p.header.Get(name)
	}
	return api.Get(p.fields, name)
}

func (p *response) write(w http.ResponseWriter) {
	for _, h := range []string{"Content-Type", "Retry-After", "Idempotent-Replayed"} {
		if v := p.get(h); v != "" {
			w.Header()[h] = []string{v} // canonical already
		}
	}
	w.WriteHeader(p.status)
	_, _ = w.Write(p.body) // the client went away; nothing to do
}

func readResponse(resp *http.Response) (*response, error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: body, code: codeOfProblem(resp.Header.Get("Content-Type"), body)}, nil
}

// codeOfProblem is the code of a problem answer, or "". The servers'
// problems are written by api.Problem.AppendJSON, whose "code" member is
// a top-level key before any other object could open, and codes are
// plain words: the code is read off the bytes without decoding the
// document (a sold-out rain's every answer is a problem). A body that
// does not look like that is decoded in full.
func codeOfProblem(contentType string, body []byte) string {
	if !strings.HasPrefix(contentType, "application/problem+json") {
		return ""
	}
	const key = `"code":"`
	if i := bytes.Index(body, []byte(key)); i > 0 && body[i-1] != '\\' && bytes.IndexByte(body[1:i], '{') < 0 && bytes.IndexByte(body[1:i], '[') < 0 {
		v := body[i+len(key):]
		if j := bytes.IndexByte(v, '"'); j > 0 && bytes.IndexByte(v[:j], '\\') < 0 {
			return string(v[:j])
		}
	}
	var prob api.Problem
	if json.Unmarshal(body, &prob) != nil {
		return ""
	}
	return prob.Code
}
