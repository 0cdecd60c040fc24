package set

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// batchUser is the context key of a sub-request's user: the batch's
// signature, checked once for the whole body, vouches for it. Only this
// package can set it, so no request from outside can carry it.
type batchUser struct{}

// handleBatch serves a router's batch (api.BatchPath): it reads the body
// (at most api.MaxBatchBytes), checks the router's signature over all of
// it and the nonce, then runs every sub-request concurrently through
// apiHandler, the server's own handler, exactly as if it had come alone
// (logged and measured each, opens of one packet meeting in its queue).
// Each sub-response is streamed as soon as it is ready, tagged with its
// sub-request's index, so a slow sub-request holds back no other answer.
// A batch refused as a whole (signature, replay, form, size) is answered
// as one problem: the router applies it to every sub-request.
func (s *Server) handleBatch(apiHandler http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		items, err := s.batch(w, r)
		if err != nil {
			api.WriteProblem(w, err, requestID(r.Context()))
			return
		}
		addField(r.Context(), zap.Int("items", len(items)))
		type ready struct {
			index  int
			answer api.BatchAnswer
			w      *itemWriter // the answer's buffers: back to the pool once it is written out
		}
		done := make(chan ready, len(items)) // a runner never waits for the writer
		// Sub-requests whose answer is known at once (a ping, an open
		// the server answers from memory) run here, through the same
		// handler, without a runner's hand-over and wake-up, and go out
		// together in the first write; the others run concurrently.
		var now []int
		for i := range items {
			if s.instant(&items[i]) {
				now = append(now, i)
				continue
			}
			s.runners.run(func() {
				a, iw := s.runItem(r, apiHandler, &items[i])
				done <- ready{i, a, iw}
			})
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w) // flushes through the logging and metrics writers
		buf := api.AppendAnswersStart(nil)
		for _, i := range now {
			a, iw := s.runItem(r, apiHandler, &items[i])
			buf = api.AppendAnswer(buf, i, a)
			s.putItemWriter(iw)
		}
		// The first write carries the answers known at once and whatever
		// else is ready; each later one waits for at least one more.
		for n, first := len(now), true; n < len(items) || (first && n > 0); first = false {
			if !first || n == 0 {
				a := <-done
				buf = api.AppendAnswer(buf, a.index, a.answer)
				s.putItemWriter(a.w)
				n++
				if n < len(items) {
					// Opens that commit together wake their runners
					// together, and the first one's send makes this
					// goroutine the next to run: it would write that
					// answer alone, and so on for each (a write, a
					// flush and a wake-up of the router's reader per
					// answer). Yielding once lets the runners ready
					// now finish, so their answers share the write.
					runtime.Gosched()
				}
			}
			for more := true; more && n < len(items); { // what else is ready goes in the same write
				select {
				case a := <-done:
					buf = api.AppendAnswer(buf, a.index, a.answer)
					s.putItemWriter(a.w)
					n++
				default:
					more = false
				}
			}
			// A failed write (the router went away) is not the sub-requests'
			// business: they run to their end all the same.
			if _, err := w.Write(buf); err == nil {
				_ = rc.Flush() // the router went away: the sub-requests run on all the same
			}
			buf = buf[:0]
		}
	}
}

// instant reports whether sub-request it is answered at once, from
// memory: a ping, or an open of a packet that sold out here (the memo) or
// by a user whose share the server knows. Anything that may wait (a
// queue, MySQL, memcached) is not. Should the memory forget the packet
// between this look and the handler's (an eviction, a failed
// transaction), the handler answers the slow way on the batch's goroutine:
// the same answer, only the batch's first write waits for it.
func (s *Server) instant(it *api.BatchItem) bool {
	if it.Method != http.MethodPost {
		return false
	}
	if it.Target == "/v1/ping" {
		return true
	}
	rest, ok := strings.CutPrefix(it.Target, "/v1/packets/")
	if !ok {
		return false
	}
	idText, ok := strings.CutSuffix(rest, "/open")
	if !ok {
		return false
	}
	id, err := hongbao.ParsePacketID(idText)
	if err != nil {
		return false // the handler answers the bad ID
	}
	if _, ok := s.memo.answer(id, it.User); ok {
		return true
	}
	_, answered, _ := s.known.answer(id, it.User, s.now())
	return answered
}

// batch reads, authenticates and decodes a batch.
func (s *Server) batch(w http.ResponseWriter, r *http.Request) ([]api.BatchItem, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxBatchBytes))
	if err != nil {
		return nil, api.BodyError(err)
	}
	signed, err := s.auth.VerifyBatch(r, s.selfAddr(r), raw)
	if err != nil {
		return nil, err
	}
	if err := s.nonces.use(signed.Nonce, s.now()); err != nil {
		return nil, err
	}
	return api.DecodeBatch(raw)
}

// runItem runs one sub-request through h and returns its answer. The
// sub-request's context is the batch's: a router gives up on a batch as a
// whole, never on one sub-request (a client that left is the router's to
// forget).
func (s *Server) runItem(batch *http.Request, h http.Handler, it *api.BatchItem) (api.BatchAnswer, *itemWriter) {
	w := s.itemWriter()
	ctx := context.WithValue(batch.Context(), batchUser{}, it.User)
	r, err := http.NewRequestWithContext(ctx, it.Method, it.Target, bytes.NewReader(it.Body))
	switch {
	case err != nil:
		api.WriteProblem(w, &hongbao.InvalidError{Code: "invalid_target", Field: "target", Message: "not a request target"}, it.RequestID)
	case strings.HasPrefix(r.URL.Path, "/internal/"):
		api.WriteProblem(w, &hongbao.Error{Code: "not_found", Message: "no such endpoint inside a batch"}, it.RequestID)
	default:
		r.RemoteAddr, r.RequestURI = batch.RemoteAddr, it.Target
		for _, hd := range it.Header {
			r.Header.Set(hd.Name, hd.Value)
		}
		if it.RequestID != "" {
			r.Header.Set(api.RequestIDHeader, it.RequestID)
		}
		h.ServeHTTP(w, r)
	}
	a := api.BatchAnswer{Status: w.status, Body: w.body.Bytes(), Header: w.fields[:0]}
	if a.Status == 0 {
		a.Status = http.StatusOK
	}
	for _, name := range api.BatchResponseHeaders {
		if v := w.header.Get(name); v != "" {
			a.Header = append(a.Header, api.Header{Name: name, Value: v})
		}
	}
	w.fields = a.Header
	return a, w
}

// itemWriter returns a writer for one sub-response, reused: a crowd's
// sub-requests would otherwise each allocate a header map and a body.
func (s *Server) itemWriter() *itemWriter {
	if w, ok := s.items.Get().(*itemWriter); ok {
		return w
	}
	return &itemWriter{header: make(http.Header, 4)}
}

// putItemWriter takes back a writer whose answer was written out (its
// body and fields are not read after this).
func (s *Server) putItemWriter(w *itemWriter) {
	if w.body.Cap() > 16<<10 { // a large answer's buffer is not kept
		return
	}
	clear(w.header)
	w.status = 0
	w.body.Reset()
	w.fields = w.fields[:0]
	s.items.Put(w)
}

// itemWriter collects one sub-response.
type itemWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
	fields []api.Header // the answer's header fields
}

func (w *itemWriter) Header() http.Header { return w.header }

func (w *itemWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *itemWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}
