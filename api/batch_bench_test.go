package api

import (
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
)

// benchItems is a batch of n opens, as a hot packet's crowd sends them.
func benchItems(n int) []BatchItem {
	items := make([]BatchItem, n)
	for i := range items {
		items[i] = BatchItem{Method: "POST", Target: "/v1/packets/382855701820690432/open", User: hongbao.UserID(1_000_000 + i*7919),
			RequestID: "0123456789abcdef"}
	}
	return items
}

// BenchmarkBatchCodec is the router's encoding and the server's decoding
// of a batch of 64 opens, and the answers back: per batch.
func BenchmarkBatchCodec(b *testing.B) {
	items := benchItems(64)
	answers := make([]BatchAnswer, 64)
	for i := range answers {
		answers[i] = BatchAnswer{Status: 200, Header: []Header{{"Content-Type", "application/json"}}, Body: []byte(`{"status":"opened","amount":123}` + "\n")}
	}
	buf := AppendBatch(nil, items)
	abuf := AppendAnswers(nil, answers)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendBatch(buf[:0], items)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeBatch(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("answers", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			abuf = AppendAnswers(abuf[:0], answers)
			if _, err := DecodeAnswers(abuf, len(answers)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
