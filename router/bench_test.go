package router

import (
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
)

func BenchmarkRoute(b *testing.B) {
	id := hongbao.PacketID(382855701820690432)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Route(goldenTopology, id, nil)
	}
}
