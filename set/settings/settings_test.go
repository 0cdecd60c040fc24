package settings

import (
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/queue"
)

func TestDefaultLimitsAreTheDomains(t *testing.T) {
	if got := Limits(configs.Defaults()); got != hongbao.DefaultLimits() {
		t.Errorf("configs.Defaults() limits %+v, want hongbao.DefaultLimits() %+v", got, hongbao.DefaultLimits())
	}
}

func TestConversions(t *testing.T) {
	c := configs.Defaults()
	c.Limits = configs.Limits{MaxTotal: 5000, MaxCount: 7, MaxShare: 900, Expiry: configs.Duration(time.Hour), MaxGreeting: 30,
		MaxAudience: 3, DailySendCount: 4, DailySendTotal: 5000, DailyReceiveTotal: 6000}
	c.Queue = configs.Queue{Size: 10, Batch: 20, Idle: configs.Duration(time.Second), TxTimeout: configs.Duration(2 * time.Second),
		SlotCap: 3, Merge: 4, Committers: 5, Memo: 6}
	if got, want := Limits(c), (hongbao.Limits{MaxTotal: 5000, MaxCount: 7, MaxShare: 900, Expiry: time.Hour, MaxGreeting: 30, MaxAudience: 3}); got != want {
		t.Errorf("Limits = %+v, want %+v", got, want)
	}
	if got, want := Daily(c), (hongbao.DailyLimits{SendCount: 4, SendTotal: 5000, ReceiveTotal: 6000}); got != want {
		t.Errorf("Daily = %+v, want %+v", got, want)
	}
	want := queue.Config{Size: 10, Batch: 20, Idle: time.Second, TxTimeout: 2 * time.Second, SlotCap: 3, Parallel: 5, Merge: 4}
	if got := Queue(c); got != want {
		t.Errorf("Queue = %+v, want %+v", got, want)
	}
}
