package settle

import (
	"slices"
	"testing"

	"github.com/hongbao-dev/hongbao/store"
)

// TestWhole: a row is removed only once every entry read of it (a packed
// row is several) was delivered; rows keep their order, once each.
func TestWhole(t *testing.T) {
	rows := func(ids ...int64) []store.OutboxRow {
		out := make([]store.OutboxRow, len(ids))
		for i, id := range ids {
			out[i].ID = id
		}
		return out
	}
	tests := []struct {
		name      string
		rows      []store.OutboxRow
		delivered []int64
		want      []int64
	}{
		{"nothing delivered", rows(1, 2), nil, nil},
		{"single rows", rows(1, 2, 3), []int64{3, 1}, []int64{1, 3}},
		{"a packed row whole", rows(4, 4, 4, 5), []int64{4, 5, 4, 4}, []int64{4, 5}},
		{"a packed row short of one", rows(4, 4, 4, 5), []int64{4, 4, 5}, []int64{5}},
		{"a packed row none", rows(4, 4, 5), []int64{5}, []int64{5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := whole(tt.rows, tt.delivered); !slices.Equal(got, tt.want) {
				t.Errorf("whole = %v, want %v", got, tt.want)
			}
		})
	}
}
