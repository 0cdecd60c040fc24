package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
)

func TestSubmitReturnsApplyOutcome(t *testing.T) {
	rec := newRecorder()
	rec.outcome = func(id hongbao.PacketID, u hongbao.UserID) hongbao.Outcome {
		switch u {
		case 2:
			return hongbao.Outcome{Err: fmt.Errorf("open: %w", hongbao.ErrSoldOut)}
		case 3:
			return hongbao.Outcome{Result: hongbao.OpenResult{User: u, Amount: 5, Status: hongbao.AlreadyOpened}}
		}
		return hongbao.Outcome{Result: hongbao.OpenResult{User: u, Amount: 7, Status: hongbao.Opened}}
	}
	m := newManager(t, Config{Size: 8, Batch: 1}, each(rec.apply), nil)
	ctx := context.Background()
	if res, err := m.Submit(ctx, 10, 1); err != nil || res != (hongbao.OpenResult{User: 1, Amount: 7, Status: hongbao.Opened}) {
		t.Errorf("Submit(user 1) = %+v, %v", res, err)
	}
	if _, err := m.Submit(ctx, 10, 2); !errors.Is(err, hongbao.ErrSoldOut) {
		t.Errorf("Submit(user 2) = %v, want ErrSoldOut", err)
	}
	if res, err := m.Submit(ctx, 10, 3); err != nil || res.Status != hongbao.AlreadyOpened || res.Amount != 5 {
		t.Errorf("Submit(user 3) = %+v, %v", res, err)
	}
	if got := rec.applied(10); !slices.Equal(got, []hongbao.UserID{1, 2, 3}) {
		t.Errorf("applied %v, want [1 2 3]", got)
	}
}

func TestNewDefaults(t *testing.T) {
	m := New(Config{}, each(newRecorder().apply), nil, zap.NewNop())
	want := Config{Size: 1, Batch: 1, Idle: 5 * time.Second, TxTimeout: 5 * time.Second, SlotCap: 1, Parallel: 16, Merge: 1}
	if m.cfg != want {
		t.Errorf("New(Config{}) config = %+v, want %+v", m.cfg, want)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
