package fence_test

import (
	"context"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/fence"
)

// TestForget: a removed SET's fence rows go, and only its own: another
// SET sharing the MySQL keeps its claims.
func TestForget(t *testing.T) {
	ctx := context.Background()
	db := dbtest.DB(t, "a", 2)
	gone, kept := dbtest.UniqueName("gone"), dbtest.UniqueName("kept")
	for _, set := range []string{gone, kept} {
		if err := fence.Own(ctx, db, set, 1, []hongbao.Bucket{3, 4}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = fence.Forget(context.Background(), db, kept) })
	if err := fence.Forget(ctx, db, gone); err != nil {
		t.Fatal(err)
	}
	for set, want := range map[string]int{gone: 0, kept: 2} {
		claims, err := fence.Claims(ctx, db, set)
		if err != nil {
			t.Fatal(err)
		}
		if len(claims) != want {
			t.Errorf("SET %s holds %d buckets after forgetting %s, want %d", set, len(claims), gone, want)
		}
	}
}
