package hongbao

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// MACs computes HMAC-SHA256s under one key, reusing the hashes and their
// input buffers: a new HMAC costs its key's two hash blocks and five
// allocations, and a router computes one for every token it has not seen
// and every batch it signs. Safe for concurrent use.
type MACs struct {
	key  []byte
	pool sync.Pool // *macState
}

// macState is a hash of MACs, its input buffer and its sum.
type macState struct {
	h   hash.Hash
	in  []byte
	sum [sha256.Size]byte
}

// maxKeptInput bounds the input buffer a pooled hash keeps: a huge
// token's or request's copy is not kept.
const maxKeptInput = 4 << 10

// NewMACs returns MACs under key.
func NewMACs(key []byte) *MACs { return &MACs{key: key} }

// Append appends to dst the MAC of the input fill appends to the buffer
// it is given (a reused buffer: fill must not keep it).
func (m *MACs) Append(dst []byte, fill func(in []byte) []byte) []byte {
	st, _ := m.pool.Get().(*macState)
	if st == nil {
		st = &macState{h: hmac.New(sha256.New, m.key)}
	}
	st.in = fill(st.in[:0])
	st.h.Reset()
	st.h.Write(st.in)
	dst = append(dst, st.h.Sum(st.sum[:0])...)
	if cap(st.in) > maxKeptInput {
		st.in = nil
	}
	m.pool.Put(st)
	return dst
}
