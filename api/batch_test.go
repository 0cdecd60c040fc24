package api

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// sampleItems are sub-requests as a router sends them.
func sampleItems() []BatchItem {
	return []BatchItem{
		{Method: "POST", Target: "/v1/packets/165143170254970885/open", User: 42, RequestID: "r-1"},
		{Method: "POST", Target: "/v1/packets", User: 7, RequestID: "r-2", Body: []byte(`{"total":1000,"count":10}`),
			Header: []Header{{"Content-Type", "application/json"}, {"Idempotency-Key", "k"}, {HeaderPacketID, "165143170254970885"}}},
		{Method: "GET", Target: "/v1/me/received?limit=5", User: 1<<63 - 1},
	}
}

func TestBatchRoundTrip(t *testing.T) {
	items := sampleItems()
	got, err := DecodeBatch(AppendBatch(nil, items))
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if got[i].Body == nil && items[i].Body == nil {
			continue
		}
		if !bytes.Equal(got[i].Body, items[i].Body) {
			t.Fatalf("item %d body %q, want %q", i, got[i].Body, items[i].Body)
		}
		got[i].Body, items[i].Body = nil, nil
	}
	for i := range got {
		got[i].Body, items[i].Body = nil, nil
	}
	if !reflect.DeepEqual(got, items) {
		t.Fatalf("decoded %+v\nwant %+v", got, items)
	}
	answers := []BatchAnswer{{Status: 200, Header: []Header{{"Content-Type", "application/json"}}, Body: []byte(`{"status":"opened","amount":3}`)},
		{Status: 503, Header: []Header{{"Retry-After", "1"}}, Body: []byte(`{}`)}, {Status: 421}}
	back, err := DecodeAnswers(AppendAnswers(nil, answers), len(answers))
	if err != nil {
		t.Fatal(err)
	}
	back[2].Body = nil
	if !reflect.DeepEqual(back, answers) {
		t.Fatalf("answers %+v\nwant %+v", back, answers)
	}
}

// TestDecodeBatchRefuses: every malformed or oversized batch is refused
// with the problem it deserves, never decoded in part.
func TestDecodeBatchRefuses(t *testing.T) {
	good := AppendBatch(nil, sampleItems())
	many := make([]BatchItem, MaxBatchItems+1)
	for i := range many {
		many[i] = sampleItems()[0]
	}
	with := func(change func(*BatchItem)) []byte {
		items := sampleItems()
		change(&items[0])
		return AppendBatch(nil, items)
	}
	tests := []struct {
		name string
		raw  []byte
		want error
	}{
		{"empty body", nil, ErrBatchMalformed},
		{"answers magic", AppendAnswers(nil, []BatchAnswer{{Status: 200}}), ErrBatchMalformed},
		{"no items", AppendBatch(nil, nil), ErrBatchMalformed},
		{"too many items", AppendBatch(nil, many), ErrBatchTooLarge},
		{"truncated", good[:len(good)-3], ErrBatchMalformed},
		{"trailing bytes", append(bytes.Clone(good), 0), ErrBatchMalformed},
		{"count larger than items", append([]byte(batchMagic), binary.AppendUvarint(nil, 4)...), ErrBatchMalformed},
		{"huge length", append([]byte(batchMagic+"\x01"), binary.AppendUvarint(nil, 1<<62)...), ErrBatchMalformed},
		{"no method", with(func(it *BatchItem) { it.Method = "" }), ErrBatchMalformed},
		{"absolute target", with(func(it *BatchItem) { it.Target = "http://evil/v1/ping" }), ErrBatchMalformed},
		{"scheme-relative target", with(func(it *BatchItem) { it.Target = "//evil/v1/ping" }), ErrBatchMalformed},
		{"user 0", with(func(it *BatchItem) { it.User = 0 }), ErrBatchMalformed},
		{"user header smuggled", with(func(it *BatchItem) { it.Header = []Header{{HeaderUser, "1"}} }), ErrBatchMalformed},
		{"signature header smuggled", with(func(it *BatchItem) { it.Header = []Header{{HeaderSig, "x"}} }), ErrBatchMalformed},
		{"header repeated", with(func(it *BatchItem) {
			it.Header = []Header{{"Idempotency-Key", "a"}, {"Idempotency-Key", "b"}}
		}), ErrBatchMalformed},
		{"body over MaxBody", with(func(it *BatchItem) { it.Body = make([]byte, MaxBody+1) }), ErrBatchMalformed},
		{"target over the field limit", with(func(it *BatchItem) { it.Target = "/" + strings.Repeat("a", maxItemField) }), ErrBatchMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			items, err := DecodeBatch(tc.raw)
			if !errors.Is(err, tc.want) || items != nil {
				t.Fatalf("DecodeBatch = %d items, %v; want %v", len(items), err, tc.want)
			}
			if s := Status(err); s != map[error]int{ErrBatchMalformed: 400, ErrBatchTooLarge: 413}[tc.want] {
				t.Fatalf("status %d for %v", s, err)
			}
		})
	}
}

// TestDecodeAnswersRefuses: a damaged answer is an error, never a partial
// or shifted set of answers.
func TestDecodeAnswersRefuses(t *testing.T) {
	answers := []BatchAnswer{{Status: 200, Body: []byte("a")}, {Status: 409, Body: []byte("b")}}
	good := AppendAnswers(nil, answers)
	for _, tc := range []struct {
		name string
		raw  []byte
		want int
	}{
		{"fewer than asked", good, 3},
		{"more than asked", good, 1},
		{"truncated", good[:len(good)-1], 2},
		{"trailing", append(bytes.Clone(good), 1), 2},
		{"status 0", AppendAnswers(nil, []BatchAnswer{{Status: 0}}), 1},
		{"status 600", AppendAnswers(nil, []BatchAnswer{{Status: 600}}), 1},
		{"request magic", AppendBatch(nil, sampleItems()), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := DecodeAnswers(tc.raw, tc.want); err == nil || got != nil {
				t.Fatalf("DecodeAnswers = %+v, %v; want an error", got, err)
			}
		})
	}
}

// signedBatch returns a batch request to target signed at now, and its body.
func signedBatch(t testing.TB, now time.Time) (*http.Request, []byte) {
	t.Helper()
	body := AppendBatch(nil, sampleItems())
	r, err := http.NewRequest(http.MethodPost, "http://"+target+BatchPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	NewInternal(internalSecret, func() time.Time { return now }).SignBatch(r, body)
	return r, body
}

// TestBatchSignature: the batch signature covers the whole body (one byte
// changed anywhere is refused), the target and path, and names no user; a
// batch signature is no signature for any other request, nor the reverse.
func TestBatchSignature(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	a := NewInternal(internalSecret, func() time.Time { return now })
	r, body := signedBatch(t, now)
	if _, err := a.VerifyBatch(received(t, r), target, body); err != nil {
		t.Fatalf("as signed: %v", err)
	}
	for i := range body {
		tampered := bytes.Clone(body)
		tampered[i] ^= 0x01
		if _, err := a.VerifyBatch(received(t, r), target, tampered); !errors.Is(err, ErrForbidden) {
			t.Fatalf("byte %d flipped: %v, want forbidden", i, err)
		}
	}
	if _, err := a.VerifyBatch(received(t, r), "10.0.0.8:8081", body); !errors.Is(err, ErrForbidden) {
		t.Fatalf("other server: %v", err)
	}
	withUser := received(t, r)
	withUser.Header.Set(HeaderUser, "42")
	if _, err := a.VerifyBatch(withUser, target, body); !errors.Is(err, ErrForbidden) {
		t.Fatalf("user header added: %v", err)
	}
	if _, err := a.Verify(received(t, r), target, body); !errors.Is(err, ErrForbidden) {
		t.Fatalf("batch signature taken as a single request's: %v", err)
	}
	other := received(t, r)
	other.URL.Path = "/v1/ping"
	if _, err := a.VerifyBatch(other, target, body); !errors.Is(err, ErrForbidden) {
		t.Fatalf("batch signature on another path: %v", err)
	}
	single, sbody := signedSend(t, now)
	in := received(t, single)
	in.Header.Del(HeaderUser)
	if _, err := a.VerifyBatch(in, target, sbody); !errors.Is(err, ErrForbidden) {
		t.Fatalf("single signature taken as a batch's: %v", err)
	}
}

// TestAnswerReaderFields: answers read from a stream come back whole
// whatever their size: fields that fit the reader's buffer (copied once
// from it) and bodies larger than it (read as they arrive), arriving a
// byte at a time; one cut inside a large body is an error.
func TestAnswerReaderFields(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789"), 1000) // over bufio's 4 KiB
	answers := []BatchAnswer{
		{Status: 200, Header: []Header{{"Content-Type", "application/json"}, {"X-Custom", strings.Repeat("v", 300)}}, Body: big},
		{Status: 404, Header: []Header{{"Content-Type", "application/problem+json"}}, Body: []byte(`{"code":"not_found"}`)},
		{Status: 204, Body: []byte{}},
	}
	raw := AppendAnswers(nil, answers)
	ar := NewAnswerReader(iotest.OneByteReader(bytes.NewReader(raw)), len(answers))
	got := make([]BatchAnswer, len(answers))
	for {
		i, a, err := ar.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[i] = a
	}
	if !reflect.DeepEqual(got, answers) {
		t.Fatalf("answers %+v\nwant %+v", got, answers)
	}
	if _, err := DecodeAnswers(raw[:len(raw)-len(answers[1].Body)-len(answers[2].Body)-2000], len(answers)); !errors.Is(err, ErrBatchMalformed) {
		t.Errorf("answers cut inside the large body: %v, want ErrBatchMalformed", err)
	}
}

// TestBatchItemSize: an item's Size is the bytes it adds to a batch's body.
func TestBatchItemSize(t *testing.T) {
	long := strings.Repeat("v", 300)
	for _, it := range []BatchItem{
		{},
		{Method: "POST", Target: "/v1/ping", User: 1},
		{Method: "POST", Target: "/v1/packets?" + long, User: 1 << 62, RequestID: long,
			Header: []Header{{Name: "Content-Type", Value: "application/json"}, {Name: "Idempotency-Key", Value: long}}, Body: make([]byte, 70_000)},
	} {
		if got, want := it.Size(), len(AppendBatch(nil, []BatchItem{it}))-len(AppendBatch(nil, nil)); got != want {
			t.Errorf("Size() = %d, the batch grows by %d", got, want)
		}
	}
}
