// Package set is a SET server: the HTTP API of one SET (send, grab, open,
// detail) over its MySQL, its memcached and the per-packet queues.
package set

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/queue"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/cache"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// Server serves one SET.
type Server struct {
	store   *store.Store
	cache   *cache.Cache
	wallet  *wallet.Wallet // nil: packets are funded without a debit (tests, benchmarks)
	grant   int64
	queue   *queue.Manager
	auth    *api.Internal
	self    string  // the address routers sign requests for; "" for the connection's
	nonces  *nonces // of signed requests within the window
	owns    func(hongbao.Bucket) bool
	recheck func(context.Context, hongbao.Bucket) bool
	// readyMore is Deps.Ready: more conditions of readiness; nil: none.
	readyMore func(context.Context) error
	minter    *hongbao.Minter
	limits    hongbao.Limits
	loc       *time.Location
	now       func() time.Time
	log       *zap.Logger
	money     *zap.Logger // the money lines: written whatever the log level
	ready     atomic.Bool
	memo      *soldOut     // openers of packets that sold out here
	known     *known       // small packets opened here that still take opens
	audiences *audiences   // who may open the packets with an audience seen here
	openers   *openerCache // committed shares on their way to memcached
	runners   *runners     // of batches' sub-requests
	answers   api.Answers  // the handlers' JSON answers and problems, in reused buffers
	items     sync.Pool    // of *itemWriter: batches' sub-responses
	http      *metrics.HTTP
	opens     *metrics.Opens
}

// Deps are the Server's collaborators.
type Deps struct {
	Store *store.Store
	Cache *cache.Cache
	// Wallet is debited at send; nil moves no money (tests and benchmarks).
	Wallet *wallet.Wallet
	// DevGrant, when positive, credits every sender once with that many
	// fen on their first send: a dev cluster's users can send at once.
	// Never set it in production.
	DevGrant int64
	Auth     *api.Internal // verifies that requests come from a router
	// Self is the host:port routers send to (the servers' entry in the
	// configuration), which their signatures name; "" takes the local
	// address each connection came in on.
	Self string
	// MaxNonces bounds the signed requests remembered to refuse replays
	// (0: defaultMaxNonces).
	MaxNonces int
	// Owns reports whether this server's SET owns a bucket at the current
	// topology version; nil leaves the decision to the MySQL fence alone.
	Owns func(hongbao.Bucket) bool
	// Recheck refreshes the topology before answering Owns, for a packet
	// not found (its bucket may just have moved away); nil: no recheck.
	Recheck func(context.Context, hongbao.Bucket) bool
	// Ready, when set, is a further condition of readiness on the
	// routers' probe (/readyz) as on the admin listener: hbserver's is
	// that its topology was read lately and names its SET, so a server
	// cut off from the meta database (keeping an old primary, answering
	// 421 for buckets that moved in) is ranked last by every router.
	Ready  func(context.Context) error
	Limits hongbao.Limits
	Queue  queue.Config
	// SoldOutMemo is how many openers of sold-out packets the server
	// remembers, to answer the crowd after the last share from memory; it
	// bounds as well, apart, the openers of small packets still taking
	// opens that the server keeps to skip their reads.
	SoldOutMemo int
	Loc         *time.Location
	Now         func() time.Time
	Log         *zap.Logger
	// HTTP and Opens measure the API's requests and the opens' outcomes;
	// nil: none.
	HTTP  *metrics.HTTP
	Opens *metrics.Opens
}

// NewServer wires a Server. It owns the queue manager it creates; Close
// drains it.
func NewServer(d Deps) *Server {
	s := &Server{store: d.Store, cache: d.Cache, wallet: d.Wallet, grant: d.DevGrant, auth: d.Auth,
		self: d.Self, nonces: newNonces(api.Window, d.MaxNonces), owns: d.Owns, recheck: d.Recheck, readyMore: d.Ready, minter: hongbao.NewMinter(d.Now),
		limits: d.Limits, loc: d.Loc, now: d.Now, log: d.Log, money: d.Log.Named(configs.MoneyLogger), memo: newSoldOut(d.SoldOutMemo), known: newKnown(d.SoldOutMemo), audiences: newAudiences(audienceUsers), openers: newOpenerCache(d.Cache),
		http: d.HTTP, opens: d.Opens}
	s.queue = queue.New(d.Queue, s.apply, d.Cache, d.Log)
	s.runners = newRunners(batchRunners)
	s.ready.Store(true)
	return s
}

// Close stops taking requests and drains every packet queue.
func (s *Server) Close(ctx context.Context) error {
	s.ready.Store(false)
	err := s.queue.Close(ctx)
	s.openers.close()
	s.runners.close()
	return err
}

// KnownLive is how many small packets taking opens the server keeps with
// every share in memory (one that expired meanwhile counts until its next
// open or eviction drops it).
func (s *Server) KnownLive() int { return s.known.size() }

// Owned tells the server which buckets its SET owns, each time the
// topology changes: it forgets what it knew of the packets of a bucket
// that left and learns nothing of them until the bucket is back, so a
// bucket that moves back starts from MySQL. The sold-out memo stays (a
// sold-out packet never changes).
func (s *Server) Owned(owns func(hongbao.Bucket) bool) { s.known.follow(owns) }

// SoldOutRemembered is how many sold-out packets the server answers from
// memory right now.
func (s *Server) SoldOutRemembered() int { return s.memo.size() }

// Queue exposes the queue manager's statistics.
func (s *Server) Queue() *queue.Manager { return s.queue }

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/packets", s.authed(s.handleSend))
	mux.HandleFunc("POST /v1/packets/{id}/grab", s.authed(s.withPacket(s.handleGrab)))
	mux.HandleFunc("POST /v1/packets/{id}/open", s.authed(s.withPacket(s.handleOpen)))
	mux.HandleFunc("GET /v1/packets/{id}", s.authed(s.withPacket(s.handleDetail)))
	mux.HandleFunc("GET /v1/me/wallet", s.authed(s.handleWallet))
	mux.HandleFunc("GET /v1/me/received", s.authed(s.handleHistory(hongbao.KindOpen)))
	mux.HandleFunc("GET /v1/me/sent", s.authed(s.handleHistory(hongbao.KindSend)))
	mux.HandleFunc("GET /v1/me/statement", s.authed(s.handleStatement))
	mux.HandleFunc("POST /v1/ping", s.authed(func(*http.Request, hongbao.UserID) (int, any, error) {
		return http.StatusOK, api.PingJSON{OK: true}, nil // the no-op behind the router: the HTTP ceiling
	}))
	if s.grant > 0 { // dev clusters only
		mux.HandleFunc("POST /v1/dev/topup", s.authed(s.handleDevTopUp))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", s.handleReady)
	mux.HandleFunc("/", api.Unrouted(mux))
	h := s.logged(s.http.Wrap(mux))
	mux.HandleFunc("POST "+api.BatchPath, s.handleBatch(h))
	return h
}

// handler is an API handler: it returns the status and body, or an error
// to be answered as a problem.
type handler func(r *http.Request, user hongbao.UserID) (int, any, error)

type packetHandler func(r *http.Request, user hongbao.UserID, id hongbao.PacketID) (int, any, error)

func (s *Server) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rid := requestID(r.Context())
		user, err := s.user(w, r)
		if err != nil {
			s.answers.Problem(w, err, rid)
			return
		}
		addField(r.Context(), zap.Stringer("user", user))
		status, body, err := h(r, user)
		err = api.ClientGone(r, err)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, sql.ErrTxDone) || sqldb.IsRetryable(err) {
			// Out of time, cancelled by this server (not by the client:
			// ClientGone took that), the outcome of a commit unknown, or
			// a read MySQL asks to retry (a lock, or a snapshot older
			// than a table just created): either way a retry gets the
			// truth (opens are idempotent).
			err = fmt.Errorf("%v: %w", err, hongbao.ErrBusy)
		} else if sqldb.IsUnreachable(err) {
			// The SET's MySQL is down or restarting: 503 with
			// Retry-After (the router tries another server first), not a
			// fault of this request.
			err = fmt.Errorf("%v: %w", err, hongbao.ErrUnavailable)
		}
		if err != nil {
			api.LogFailure(r.Context(), s.log, err)
			s.answers.Problem(w, err, rid)
			return
		}
		s.answers.JSON(w, status, body)
	}
}

func (s *Server) withPacket(h packetHandler) handler {
	return func(r *http.Request, user hongbao.UserID) (int, any, error) {
		id, err := hongbao.ParsePacketID(r.PathValue("id"))
		if err != nil {
			return 0, nil, err
		}
		addField(r.Context(), zap.Stringer("packet_id", id))
		if err := s.own(id.Bucket()); err != nil {
			return 0, nil, err
		}
		status, body, err := h(r, user, id)
		if errors.Is(err, hongbao.ErrNotFound) {
			err = s.confirmNotFound(r.Context(), id, err)
		}
		return status, body, err
	}
}

// confirmNotFound settles a not-found answer (notFound) for packet id
// before a client is told: a read that found nothing may have raced with
// the bucket's move (away, so the packet lives in the new owner; or here,
// arriving with it), and a server whose topology is stale, or whose
// refresh failed under load, must not answer 404 for a packet that
// exists. The SET's fence is the truth of who may write the bucket: one
// snapshot holding the fence and not the packet confirms the 404
// (Store.Absent). Not owned: 421, the router refreshes and asks the new
// owner. There after all: busy, and the retry finds it.
func (s *Server) confirmNotFound(ctx context.Context, id hongbao.PacketID, notFound error) error {
	absent, err := s.store.Absent(ctx, id)
	switch {
	case err != nil:
		return err
	case !absent:
		return fmt.Errorf("packet %s found on a second look (its bucket arrived meanwhile): %w", id, hongbao.ErrBusy)
	case s.recheck != nil && !s.recheck(ctx, id.Bucket()):
		return fmt.Errorf("bucket %d: %w", id.Bucket(), hongbao.ErrWrongSet)
	}
	return notFound
}

// own refuses a bucket the SET does not own at the current topology
// version; the router then refreshes its topology and retries.
func (s *Server) own(b hongbao.Bucket) error {
	if s.owns != nil && !s.owns(b) {
		return fmt.Errorf("bucket %d: %w", b, hongbao.ErrWrongSet)
	}
	return nil
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if err := s.Ready(ctx); err != nil {
		api.LogFailure(r.Context(), s.log, err)
		api.WriteProblem(w, err, requestID(r.Context()))
		return
	}
	w.Write([]byte("ready\n"))
}
