package api

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeBatch: DecodeBatch never panics, refuses with a batch problem
// only, and what it accepts encodes back to exactly its input (one batch
// has one wire form, so the signed bytes are the decoded ones).
func FuzzDecodeBatch(f *testing.F) {
	f.Add(AppendBatch(nil, sampleItems()))
	f.Add(AppendBatch(nil, sampleItems()[:1]))
	f.Add([]byte(batchMagic + "\x01\x04POST\x05/x/y\x2a\x00\x00\x00"))
	f.Add([]byte(batchMagic + "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"))
	f.Add([]byte("HBR1\x01"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		items, err := DecodeBatch(raw)
		if err != nil {
			if items != nil || !IsBatchRefusal(err) {
				t.Fatalf("DecodeBatch = %d items, %v", len(items), err)
			}
			return
		}
		if len(items) == 0 || len(items) > MaxBatchItems {
			t.Fatalf("%d items accepted", len(items))
		}
		for _, it := range items {
			if it.User <= 0 || it.Method == "" || it.Target[0] != '/' || len(it.Body) > MaxBody {
				t.Fatalf("accepted %+v", it)
			}
		}
		if back := AppendBatch(nil, items); !bytes.Equal(back, raw) {
			t.Fatalf("re-encoded %q, input %q", back, raw)
		}
	})
}

// FuzzDecodeAnswers: DecodeAnswers never panics and accepts exactly the
// asked number of answers with valid statuses.
func FuzzDecodeAnswers(f *testing.F) {
	f.Add(AppendAnswers(nil, []BatchAnswer{{Status: 200, Body: []byte("{}")}, {Status: 503}}), 2)
	f.Add([]byte("HBR1\x01\xc8\x01"), 1)
	f.Fuzz(func(t *testing.T, raw []byte, want int) {
		answers, err := DecodeAnswers(raw, want)
		if err != nil {
			if answers != nil || !errors.Is(err, ErrBatchMalformed) && !errors.Is(err, ErrBatchTooLarge) {
				t.Fatalf("DecodeAnswers = %v, %v", answers, err)
			}
			return
		}
		if len(answers) != want {
			t.Fatalf("%d answers, asked %d", len(answers), want)
		}
		for _, a := range answers {
			if a.Status < 100 || a.Status > 599 {
				t.Fatalf("status %d accepted", a.Status)
			}
		}
	})
}
