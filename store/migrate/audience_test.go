package migrate_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
)

// TestMoveCarriesAudiences: a bucket's move copies its packets' audiences
// (the database's audience table is shared by its ten buckets: only the
// moving bucket's rows go), so the target refuses a stranger as the source
// did.
func TestMoveCarriesAudiences(t *testing.T) {
	p := startPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	create := func(b hongbao.Bucket, a hongbao.Audience) hongbao.PacketID {
		id, err := p.minter.Next(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := p.src.Create(ctx, store.NewPacket{ID: id, Sender: dbtest.FreshUser(), Expiry: time.Hour, Funding: hongbao.Funded,
			Req: hongbao.SendRequest{Total: 200, Count: 2, Type: hongbao.Fixed, Audience: a}}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	group := hongbao.Audience{11, 12}
	mine, plain, theirs := create(p.b, group), create(p.b, nil), create(p.other, hongbao.Audience{13, 14})
	m := p.move(2)
	mustPass(t, m)
	if bad := verify(t, m); len(bad) != 0 {
		t.Fatalf("verify after the pass: %v", bad)
	}
	dbtest.Own(t, p.to, "t", []hongbao.Bucket{p.b})
	dst := store.New(p.to, "t", p.loc, p.clock.Now, rand.Int64N)
	for _, tt := range []struct {
		id   hongbao.PacketID
		want hongbao.Audience
	}{{mine, group}, {plain, nil}} {
		got, err := dst.Head(ctx, tt.id)
		if err != nil || !slices.Equal(got.Audience, tt.want) || (got.Audience == nil) != (tt.want == nil) {
			t.Errorf("packet %s on the target: audience %v (%v), want %v", tt.id, got.Audience, err, tt.want)
		}
	}
	if n := dbtest.Count(t, p.to, "SELECT COUNT(*) FROM "+p.b.DB()+".t_audience WHERE packet_id = ?", theirs); n != 0 {
		t.Errorf("the other bucket's audience was copied")
	}
	b, err := dst.OpenBatch(ctx, mine, []hongbao.UserID{99, 11})
	if err != nil || b.Outcomes[0].Err != hongbao.ErrNotInAudience || b.Outcomes[1].Err != nil || b.Outcomes[1].Result.Amount != 100 {
		t.Fatalf("opens on the target: %+v, %v; want a stranger refused and a member's 100", b.Outcomes, err)
	}
}
