package main_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/router/clustertest"
	"github.com/hongbao-dev/hongbao/router/topology"
)

// TestMoveFollowsFailover is issue 23's finding 4: a failover of the
// target SET during a rebalance apply of two moves into it: while the
// first is frozen (the mover paused after the source's fence was taken,
// its pools opened on the target's primary), and so before the second
// begins. The old primary is paused (SIGSTOP), as a hung machine: a mover
// that kept it would wait for ever on its first statement there. The
// mover must follow the topology to the promoted primary: the apply
// finishes (or fails with an error and `rebalance apply` again finishes
// it), every share is on the target's new primary with its amount, and
// verify passes.
func TestMoveFollowsFailover(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: 1_000_000, Replicated: []string{"b"}, Replicas: 2})
	a, b := c.Sets[0].Name, c.Set("b")
	ctx := context.Background()
	var moves []topology.Move
	packets := map[hongbao.PacketID]map[hongbao.UserID]int64{}
	for _, bucket := range bucketsOf(t, c, a)[4:6] {
		id, shares := sendInto(t, c, bucket, 10, 3)
		packets[id] = shares
		moves = append(moves, topology.Move{Bucket: bucket, From: a, To: b.Name})
	}
	j, err := topology.NewJournal(ctx, c.Meta(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Create(ctx, "apply", 0, "two moves into b", moves); err != nil {
		t.Fatal(err)
	}
	pause := filepath.Join(t.TempDir(), "freeze")
	done := make(chan error, 1)
	var out string
	go func() {
		var err error
		out, err = c.CtlWith([]string{"HBCTL_FAULT=pause@frozen:" + pause}, "rebalance", "apply")
		done <- err
	}()
	waitFile(t, pause+".ready", 60*time.Second)
	if err := b.Group.Primary.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Group.Primary.Resume() })
	c.MustCtl(t, "set", "failover", b.Name)
	if err := os.WriteFile(pause+".go", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Logf("the apply failed after the failover (resumed below): %v\n%s", err, out)
			c.MustCtl(t, "rebalance", "apply")
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("the apply did not end 90 s after the failover of its target: stuck on the old primary")
	}
	if st := rebalanceStatus(t, c); st.State != "done" || st.Done != 2 {
		t.Errorf("after the apply: %v", st)
	}
	for _, m := range moves {
		if got := ownerOf(t, c, m.Bucket); got != b.Name {
			t.Errorf("bucket %d is on %s, want %s", m.Bucket, got, b.Name)
		}
	}
	if m := c.Follow(t, b.Name); m == b.Group.Primary {
		t.Fatal("SET b's MySQL is still its old primary after the failover")
	}
	for id, shares := range packets {
		u := user()
		o := c.Client.Retrying(20*time.Second).Open(u, id.String())
		if o.Status != http.StatusOK || o.Body.Status != hongbao.Opened {
			t.Fatalf("open after the move: %v", o)
		}
		shares[u] = o.Body.Amount
		sameShares(t, "on the target's new primary", sharesOn(t, c, b.Name, id), shares)
		if n := len(sharesOn(t, c, b.Name, id)); n != len(shares) {
			t.Errorf("the target holds %d shares of %s, %d were answered", n, id, len(shares))
		}
	}
	waitOutbox(t, c)
	c.CheckInvariants(t)
}

// waitFile waits until path exists.
func waitFile(t *testing.T, path string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
