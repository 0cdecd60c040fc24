package queue_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/queue"
)

// BenchmarkHandOff measures the queue alone: submit, batch, answer, with an
// apply that does no I/O, from many goroutines on one hot packet.
func BenchmarkHandOff(b *testing.B) { benchmarkHandOff(b, nil) }

// BenchmarkHandOffMetrics is BenchmarkHandOff with the queue's metrics on
// (batch sizes, packets per transaction, transaction time): the difference
// is what the metrics cost the queue.
func BenchmarkHandOffMetrics(b *testing.B) {
	benchmarkHandOff(b, metrics.NewQueue(prometheus.NewRegistry()))
}

func benchmarkHandOff(b *testing.B, m *metrics.Queue) {
	apply := func(_ context.Context, works []queue.Work) ([][]hongbao.Outcome, error) {
		outs := make([][]hongbao.Outcome, len(works))
		for i, w := range works {
			outs[i] = make([]hongbao.Outcome, len(w.Users))
			for j, u := range w.Users {
				outs[i][j].Result = hongbao.OpenResult{User: u, Amount: 1, Status: hongbao.Opened}
			}
		}
		return outs, nil
	}
	mgr := queue.New(queue.Config{Size: 1 << 16, Batch: 32, Idle: time.Second, TxTimeout: time.Second, SlotCap: 1, Metrics: m},
		apply, nil, zap.NewNop())
	defer mgr.Close(context.Background())
	var user atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := mgr.Submit(ctx, 1, hongbao.UserID(user.Add(1))); err != nil {
				b.Fatal(err)
			}
		}
	})
}
