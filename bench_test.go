package hongbao_test

import (
	"math/rand/v2"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

func BenchmarkDrawRandom(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	for b.Loop() {
		_ = hongbao.Draw(hongbao.Random, 20000, 100, r.Int64N)
	}
}

func BenchmarkSplit100(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	for b.Loop() {
		_ = hongbao.Split(hongbao.Random, 20000, 100, r.Int64N)
	}
}

func BenchmarkMinterNext(b *testing.B) {
	m := hongbao.NewMinter(time.Now)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Next(7); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBucketFor(b *testing.B) {
	key := []byte("order-2026-11-22-000123")
	b.ReportAllocs()
	for b.Loop() {
		_ = hongbao.BucketFor(42, key)
	}
}

func BenchmarkTableNames(b *testing.B) {
	loc, _ := time.LoadLocation("Asia/Shanghai")
	id := hongbao.PacketID(382855701820690432)
	b.ReportAllocs()
	for b.Loop() {
		t := id.Table(loc)
		_, _ = t.Packets(), t.Details()
	}
}

func BenchmarkParsePacketID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := hongbao.ParsePacketID("382855701820690432"); err != nil {
			b.Fatal(err)
		}
	}
}
