package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestBatchItemFits: what a router may put in a batch is what a server's
// DecodeBatch takes.
func TestBatchItemFits(t *testing.T) {
	ok := BatchItem{Method: http.MethodPost, Target: "/v1/packets/1/open", User: 1, RequestID: "r"}
	long := strings.Repeat("a", 3000)
	cases := []struct {
		name string
		edit func(it *BatchItem)
		fits bool
	}{
		{"plain", func(*BatchItem) {}, true},
		{"long target", func(it *BatchItem) { it.Target += "?x=" + long }, false},
		{"long header", func(it *BatchItem) { it.Header = []Header{{Name: "Idempotency-Key", Value: long}} }, false},
		{"long request ID", func(it *BatchItem) { it.RequestID = long }, false},
		{"largest body", func(it *BatchItem) { it.Body = make([]byte, MaxBody) }, true},
		{"body over MaxBody", func(it *BatchItem) { it.Body = make([]byte, MaxBody+1) }, false},
	}
	for _, c := range cases {
		it := ok
		c.edit(&it)
		_, err := DecodeBatch(AppendBatch(nil, []BatchItem{it}))
		if it.Fits() != c.fits || (err == nil) != c.fits {
			t.Errorf("%s: Fits %v, DecodeBatch %v; want fits %v", c.name, it.Fits(), err, c.fits)
		}
	}
}
