package queue

import (
	"fmt"
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// TestWaitingPick: a transaction takes the oldest work, then whole buckets
// in the order of their oldest work, within Merge packets and Batch opens;
// the rest keep their order.
func TestWaitingPick(t *testing.T) {
	// pk is packet n of bucket b, with opens users.
	pk := func(b, n, opens int) *job {
		id, err := hongbao.NewPacketID(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC), hongbao.Bucket(b), n)
		if err != nil {
			t.Fatal(err)
		}
		return &job{work: Work{ID: id, Users: make([]hongbao.UserID, opens)}}
	}
	name := func(js []*job) []string {
		var out []string
		for _, j := range js {
			out = append(out, fmt.Sprintf("b%d/%d", j.work.ID.Bucket(), j.work.ID.Seq()))
		}
		return out
	}
	for _, tc := range []struct {
		name         string
		jobs         []*job
		merge, batch int
		took, left   []string
	}{
		{"one bucket in arrival order", []*job{pk(1, 1, 1), pk(1, 2, 1), pk(1, 3, 1)}, 8, 100,
			[]string{"b1/1", "b1/2", "b1/3"}, nil},
		{"the oldest's bucket first", []*job{pk(1, 1, 1), pk(2, 1, 1), pk(3, 1, 1), pk(2, 2, 1), pk(1, 2, 1)}, 3, 100,
			[]string{"b1/1", "b1/2", "b2/1"}, []string{"b3/1", "b2/2"}},
		{"whole buckets in order of their oldest", []*job{pk(5, 1, 1), pk(7, 1, 1), pk(6, 1, 1), pk(6, 2, 1), pk(7, 2, 1)}, 8, 100,
			[]string{"b5/1", "b7/1", "b7/2", "b6/1", "b6/2"}, nil},
		{"merge 1 is first come first served", []*job{pk(1, 1, 1), pk(2, 1, 1), pk(1, 2, 1)}, 1, 100,
			[]string{"b1/1"}, []string{"b2/1", "b1/2"}},
		{"batch stops after the work that reaches it", []*job{pk(1, 1, 3), pk(2, 1, 2), pk(1, 2, 4), pk(3, 1, 1)}, 8, 5,
			[]string{"b1/1", "b1/2"}, []string{"b2/1", "b3/1"}},
		{"a big first work goes alone", []*job{pk(1, 1, 300), pk(1, 2, 1)}, 8, 256,
			[]string{"b1/1"}, []string{"b1/2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWaiting()
			for _, j := range tc.jobs {
				w.put(j)
			}
			js, ok := w.take(tc.merge, tc.batch)
			if !ok {
				t.Fatal("take: closed")
			}
			if got := name(js); !slices.Equal(got, tc.took) {
				t.Errorf("took %v, want %v", got, tc.took)
			}
			if got := name(w.jobs); !slices.Equal(got, tc.left) {
				t.Errorf("left %v, want %v", got, tc.left)
			}
		})
	}
}

// TestWaitingClose: take hands out what waits after close, then reports
// closed.
func TestWaitingClose(t *testing.T) {
	w := newWaiting()
	w.put(&job{work: Work{ID: 1, Users: make([]hongbao.UserID, 1)}})
	w.close()
	if js, ok := w.take(8, 8); !ok || len(js) != 1 {
		t.Fatalf("take after close = %d jobs, %v; want the waiting one", len(js), ok)
	}
	if js, ok := w.take(8, 8); ok || js != nil {
		t.Fatalf("take when closed and empty = %v, %v; want nothing, false", js, ok)
	}
}
