package api

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"

	hongbao "github.com/hongbao-dev/hongbao"
)

// BatchPath is the SET servers' internal endpoint that takes a router's
// coalesced requests: one signed exchange carries many sub-requests, each
// run as it would run alone, each answered on its own.
const BatchPath = "/internal/v1/batch"

// Bounds of a batch a server accepts. A router cuts its batches well below
// them; anything larger is refused whole (413 batch_too_large).
const (
	MaxBatchItems = 512
	// MaxBatchBytes bounds a batch's body: room for many sub-requests, and
	// always for one of the largest body a client may send.
	MaxBatchBytes = 4 << 20
	// maxItemHeaders bounds the headers of one sub-request or sub-response.
	maxItemHeaders = 8
	// maxItemField bounds a method, target, request ID or header field.
	maxItemField = 2048
	// maxAnswerBody bounds one sub-response's body (a detail of a large
	// activity packet lists every share).
	maxAnswerBody = 256 << 20
)

// Refusals of a batch as a whole.
var (
	ErrBatchMalformed = &hongbao.Error{Code: "malformed_batch", Message: "the batch body is not a valid batch"}
	ErrBatchTooLarge  = &hongbao.Error{Code: "batch_too_large", Message: "the batch holds too many sub-requests or bytes"}
)

// batchRequestHeaders are the only headers a sub-request may carry: the
// ones a router forwards today (X-Hb-User is the item's User field).
var batchRequestHeaders = map[string]bool{"Content-Type": true, "Idempotency-Key": true, HeaderPacketID: true}

// BatchResponseHeaders are the headers of a sub-response that a router
// relays to its client; a server sends no others.
var BatchResponseHeaders = []string{"Content-Type", "Retry-After", "Idempotent-Replayed"}

// Header is one header field of a sub-request or sub-response.
type Header struct{ Name, Value string }

// BatchItem is one sub-request: what a router would have sent alone, with
// the user it authenticated (vouched for by the batch's signature, which
// covers the whole body).
type BatchItem struct {
	Method    string
	Target    string // the request URI: path and query
	User      hongbao.UserID
	RequestID string
	Header    []Header
	Body      []byte
}

// Fits reports whether it can travel in a batch: DecodeBatch refuses the
// whole batch for a sub-request with a method, target, request ID or
// header over maxItemField bytes, more than maxItemHeaders headers or a
// body over MaxBody. A client's request may be larger (a long query or
// Idempotency-Key): a router sends it alone.
func (it *BatchItem) Fits() bool {
	if len(it.Method) > maxItemField || len(it.Target) > maxItemField || len(it.RequestID) > maxItemField ||
		len(it.Header) > maxItemHeaders || len(it.Body) > MaxBody {
		return false
	}
	for _, h := range it.Header {
		if len(h.Name) > maxItemField || len(h.Value) > maxItemField {
			return false
		}
	}
	return true
}

// BatchAnswer is one sub-response.
type BatchAnswer struct {
	Status int
	Header []Header
	Body   []byte
}

// Get returns the value of header name (canonical form), or "".
func Get(hs []Header, name string) string {
	for _, h := range hs {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

// Wire magic of the two bodies: a request batch can never be read as an
// answer, nor the other way round, and a new layout gets a new magic.
const (
	batchMagic  = "HBQ1"
	answerMagic = "HBR2" // answers streamed in the order they are ready, each with its item's index
)

// AppendBatch appends the wire form of items to b. Layout: magic, item
// count, then per item method, target, user, request ID, headers (count,
// then name and value each), body; every string and the body are
// length-prefixed with uvarints.
func AppendBatch(b []byte, items []BatchItem) []byte {
	b = append(b, batchMagic...)
	b = binary.AppendUvarint(b, uint64(len(items)))
	for _, it := range items {
		b = appendString(b, it.Method)
		b = appendString(b, it.Target)
		b = binary.AppendUvarint(b, uint64(it.User))
		b = appendString(b, it.RequestID)
		b = appendHeaders(b, it.Header)
		b = binary.AppendUvarint(b, uint64(len(it.Body)))
		b = append(b, it.Body...)
	}
	return b
}

// Size is how many bytes the item takes in a batch's body (AppendBatch):
// what a router counts to keep its batches under MaxBatchBytes, where the
// bodies alone would leave a batch of many requests with long queries and
// headers over it.
func (it *BatchItem) Size() int {
	n := stringSize(it.Method) + stringSize(it.Target) + uvarintLen(uint64(it.User)) + stringSize(it.RequestID) +
		uvarintLen(uint64(len(it.Header))) + uvarintLen(uint64(len(it.Body))) + len(it.Body)
	for _, h := range it.Header {
		n += stringSize(h.Name) + stringSize(h.Value)
	}
	return n
}

// stringSize is the length of s as appendString writes it.
func stringSize(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

// AppendAnswersStart appends what starts a batch's answers: the magic. The
// answers follow one by one (AppendAnswer), in the order they are ready, so
// a slow sub-request delays no other's answer.
func AppendAnswersStart(b []byte) []byte { return append(b, answerMagic...) }

// AppendAnswer appends the answer to sub-request index: index, status,
// headers, body.
func AppendAnswer(b []byte, index int, a BatchAnswer) []byte {
	b = binary.AppendUvarint(b, uint64(index))
	b = binary.AppendUvarint(b, uint64(a.Status))
	b = appendHeaders(b, a.Header)
	b = binary.AppendUvarint(b, uint64(len(a.Body)))
	return append(b, a.Body...)
}

// AppendAnswers appends answers, in item order, as a server streams them.
func AppendAnswers(b []byte, answers []BatchAnswer) []byte {
	b = AppendAnswersStart(b)
	for i, a := range answers {
		b = AppendAnswer(b, i, a)
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendHeaders(b []byte, hs []Header) []byte {
	b = binary.AppendUvarint(b, uint64(len(hs)))
	for _, h := range hs {
		b = appendString(b, h.Name)
		b = appendString(b, h.Value)
	}
	return b
}

// DecodeBatch reads a request batch. It refuses (ErrBatchMalformed) a body
// that is not exactly one well-formed batch, and (ErrBatchTooLarge) one of
// more than MaxBatchItems sub-requests. Item bodies alias raw.
func DecodeBatch(raw []byte) ([]BatchItem, error) {
	d := decoder{b: raw}
	n, err := d.header(batchMagic)
	if err != nil {
		return nil, err
	}
	items := make([]BatchItem, n)
	for i := range items {
		it := &items[i]
		it.Method = d.known(methods)
		it.Target = d.str()
		user := d.uvarint()
		it.RequestID = d.str()
		it.Header = d.headers()
		it.Body = d.bytes(MaxBody)
		if d.err != nil {
			return nil, fmt.Errorf("item %d: %w", i, d.err)
		}
		if err := checkItem(it, user); err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return items, nil
}

// checkItem refuses a sub-request a router never sends: no method or
// target, a target that is not an API path, a bad user, a header outside
// the forwarded ones or repeated.
func checkItem(it *BatchItem, user uint64) error {
	if it.Method == "" || len(it.Target) < 2 || it.Target[0] != '/' || it.Target[1] == '/' {
		return ErrBatchMalformed
	}
	if user == 0 || user > 1<<63-1 {
		return ErrBatchMalformed
	}
	it.User = hongbao.UserID(user)
	for i, h := range it.Header {
		if !batchRequestHeaders[h.Name] {
			return fmt.Errorf("header %q: %w", h.Name, ErrBatchMalformed)
		}
		for _, o := range it.Header[:i] {
			if o.Name == h.Name {
				return fmt.Errorf("header %q repeated: %w", h.Name, ErrBatchMalformed)
			}
		}
	}
	return nil
}

// AnswerReader reads a server's streamed answers to a batch of want
// sub-requests, each as soon as it arrives. Every answer is whole and
// names an item not answered before, or Next fails: an answer cut short
// (a server killed mid-batch) is never read as one.
type AnswerReader struct {
	r       *bufio.Reader
	want    int
	seen    []bool
	n       int
	started bool
}

// NewAnswerReader reads the answers to want sub-requests from r.
// A want below zero reads none.
func NewAnswerReader(r io.Reader, want int) *AnswerReader {
	want = max(want, 0)
	return &AnswerReader{r: bufio.NewReader(r), want: want, seen: make([]bool, want)}
}

// Next returns the next answer and the index of its sub-request; io.EOF
// once all want are read.
func (ar *AnswerReader) Next() (int, BatchAnswer, error) {
	if !ar.started {
		var magic [len(answerMagic)]byte
		if _, err := io.ReadFull(ar.r, magic[:]); err != nil || string(magic[:]) != answerMagic {
			return 0, BatchAnswer{}, fmt.Errorf("no %s magic (%v): %w", answerMagic, err, ErrBatchMalformed)
		}
		ar.started = true
	}
	if ar.n == ar.want {
		return 0, BatchAnswer{}, io.EOF
	}
	d := streamDecoder{r: ar.r}
	index := d.uvarint()
	status := d.uvarint()
	a := BatchAnswer{Header: d.headers(), Body: d.bytes(maxAnswerBody)}
	switch {
	case d.err != nil:
		return 0, BatchAnswer{}, fmt.Errorf("answer %d of %d: %w", ar.n+1, ar.want, d.err)
	case index >= uint64(ar.want) || ar.seen[index]:
		return 0, BatchAnswer{}, fmt.Errorf("answer for item %d of %d, twice or unknown: %w", index, ar.want, ErrBatchMalformed)
	case status < 100 || status > 599:
		return 0, BatchAnswer{}, fmt.Errorf("answer %d: status %d: %w", index, status, ErrBatchMalformed)
	}
	ar.seen[index] = true
	ar.n++
	a.Status = int(status)
	return int(index), a, nil
}

// DecodeAnswers reads all the answers to a batch of want sub-requests from
// raw and returns them in item order: exactly want answers, one per item,
// and nothing after them.
func DecodeAnswers(raw []byte, want int) ([]BatchAnswer, error) {
	if want < 0 {
		return nil, fmt.Errorf("%d answers asked: %w", want, ErrBatchMalformed)
	}
	r := bytes.NewReader(raw)
	ar := NewAnswerReader(r, want)
	answers := make([]BatchAnswer, want)
	for {
		i, a, err := ar.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		answers[i] = a
	}
	if n := r.Len() + ar.r.Buffered(); n != 0 {
		return nil, fmt.Errorf("%d bytes after the last answer: %w", n, ErrBatchMalformed)
	}
	return answers, nil
}

// streamDecoder reads the answers' wire form from a stream; the first
// error sticks.
type streamDecoder struct {
	r   *bufio.Reader
	err error
}

func (d *streamDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	var v uint64
	for i, shift := 0, uint(0); ; i, shift = i+1, shift+7 {
		c, err := d.r.ReadByte()
		if err != nil {
			d.err = fmt.Errorf("varint: %v: %w", err, ErrBatchMalformed)
			return 0
		}
		if i == binary.MaxVarintLen64-1 && c > 1 || i > 0 && c == 0 {
			d.err = fmt.Errorf("bad varint: %w", ErrBatchMalformed) // overflow, or an overlong form
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
}

// length reads a field's length prefix, at most limit.
func (d *streamDecoder) length(limit int) (int, bool) {
	n := d.uvarint()
	if d.err != nil {
		return 0, false
	}
	if n > uint64(limit) {
		d.err = fmt.Errorf("field of %d bytes, at most %d: %w", n, limit, ErrBatchMalformed)
		return 0, false
	}
	return int(n), true
}

// inPlace returns the next n bytes where the reader buffers them, valid
// until its next read, when n fits its buffer; nil and false when it does
// not. A stream that ends first is an error (d.err).
func (d *streamDecoder) inPlace(n int) ([]byte, bool) {
	if n > d.r.Size() {
		return nil, false
	}
	p, err := d.r.Peek(n)
	if err != nil {
		d.err = fmt.Errorf("field cut at %d of %d bytes: %v: %w", len(p), n, err, ErrBatchMalformed)
		return nil, true
	}
	return p, true
}

// bytes reads a length-prefixed field of at most limit bytes: copied once
// from the reader's buffer when it fits there, else grown.
func (d *streamDecoder) bytes(limit int) []byte {
	n, ok := d.length(limit)
	if !ok {
		return nil
	}
	if p, ok := d.inPlace(n); ok {
		if d.err != nil {
			return nil
		}
		b := make([]byte, n)
		copy(b, p)
		_, _ = d.r.Discard(n) // buffered: cannot fail
		return b
	}
	return d.grown(n)
}

// grown reads the next n bytes, larger than the reader's buffer, into a
// buffer grown as they arrive (a made-up length costs no memory).
func (d *streamDecoder) grown(n int) []byte {
	var buf bytes.Buffer
	if got, err := io.CopyN(&buf, d.r, int64(n)); err != nil {
		d.err = fmt.Errorf("field cut at %d of %d bytes: %w", got, n, ErrBatchMalformed)
		return nil
	}
	return buf.Bytes()
}

// str reads a length-prefixed string of at most limit bytes, the copy in
// common when it is one (no allocation).
func (d *streamDecoder) str(limit int, common []string) string {
	n, ok := d.length(limit)
	if !ok {
		return ""
	}
	p, ok := d.inPlace(n)
	if !ok { // longer than the reader's buffer: never one of common
		return string(d.grown(n))
	}
	if d.err != nil {
		return ""
	}
	s := knownString(p, common)
	_, _ = d.r.Discard(n) // buffered: cannot fail
	return s
}

func (d *streamDecoder) headers() []Header { return readHeaders(d.uvarint, d.str, &d.err) }

// readHeaders reads a header list (a count, then each name and value) with
// a decoder's uvarint and str, whose first error sticks in *err. Known
// names and common values cost no allocation.
func readHeaders(uvarint func() uint64, str func(limit int, common []string) string, err *error) []Header {
	n := uvarint()
	if *err != nil || n == 0 {
		return nil
	}
	if n > maxItemHeaders {
		*err = fmt.Errorf("%d headers: %w", n, ErrBatchMalformed)
		return nil
	}
	hs := make([]Header, n)
	for i := range hs {
		name := str(maxItemField, headerNames)
		hs[i] = Header{Name: name, Value: str(maxItemField, headerValues)}
	}
	if *err != nil {
		return nil
	}
	return hs
}

// decoder reads the wire form; the first error sticks and every later read
// returns zero values.
type decoder struct {
	b   []byte
	err error
}

// header reads the magic and the item count (1..MaxBatchItems).
func (d *decoder) header(magic string) (int, error) {
	if len(d.b) < len(magic) || string(d.b[:len(magic)]) != magic {
		return 0, fmt.Errorf("no %s magic: %w", magic, ErrBatchMalformed)
	}
	d.b = d.b[len(magic):]
	n := d.uvarint()
	switch {
	case d.err != nil:
		return 0, d.err
	case n == 0:
		return 0, fmt.Errorf("empty batch: %w", ErrBatchMalformed)
	case n > MaxBatchItems:
		return 0, fmt.Errorf("%d sub-requests, at most %d: %w", n, MaxBatchItems, ErrBatchTooLarge)
	}
	return int(n), nil
}

func (d *decoder) end() error {
	if len(d.b) != 0 {
		return fmt.Errorf("%d bytes after the last item: %w", len(d.b), ErrBatchMalformed)
	}
	return nil
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != uvarintLen(v) {
		// Overlong forms refused too: one batch has one wire form.
		d.err = fmt.Errorf("bad varint: %w", ErrBatchMalformed)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes reads a length-prefixed field of at most limit bytes; it aliases
// the input.
func (d *decoder) bytes(limit int) []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(limit) || n > uint64(len(d.b)) {
		d.err = fmt.Errorf("field of %d bytes (%d left, at most %d): %w", n, len(d.b), limit, ErrBatchMalformed)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func (d *decoder) str() string { return string(d.bytes(maxItemField)) }

// strOf reads a string of at most limit bytes, the copy in common when it
// is one.
func (d *decoder) strOf(limit int, common []string) string {
	return knownString(d.bytes(limit), common)
}

// Methods and header names a batch carries, decoded without an allocation.
var (
	methods     = []string{http.MethodPost, http.MethodGet}
	headerNames = []string{"Content-Type", "Idempotency-Key", HeaderPacketID, "Retry-After", "Idempotent-Replayed"}
	// headerValues are the values most answers carry.
	headerValues = []string{"application/json", "application/problem+json"}
)

// known reads a string, returning the copy in common when it is one.
func (d *decoder) known(common []string) string { return d.strOf(maxItemField, common) }

func knownString(b []byte, common []string) string {
	for _, s := range common {
		if string(b) == s {
			return s
		}
	}
	return string(b)
}

func (d *decoder) headers() []Header { return readHeaders(d.uvarint, d.strOf, &d.err) }

// IsBatchRefusal reports whether err refuses a batch as a whole for its
// form or size.
func IsBatchRefusal(err error) bool {
	return errors.Is(err, ErrBatchMalformed) || errors.Is(err, ErrBatchTooLarge)
}

// SignBatch signs a batch request with body body to the server
// r.URL.Host: like Sign, it
// covers the method, target server, path, time, a fresh nonce and a
// SHA-256 of the whole body, which holds every sub-request with its user;
// it names no user of its own.
func (a *Internal) SignBatch(r *http.Request, body []byte) {
	a.sign(r, 0, body)
}

// VerifyBatch checks the signature of a batch request as Verify does, and
// that it names no user of its own: a batch's users are inside its body,
// under the signature's body hash.
func (a *Internal) VerifyBatch(r *http.Request, self string, body []byte) (Signed, error) {
	if len(r.Header.Values(HeaderUser)) != 0 {
		return Signed{}, fmt.Errorf("a batch names its users inside: %w", ErrForbidden)
	}
	return a.verify(r, self, body)
}
