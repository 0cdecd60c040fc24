package store_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
)

// BenchmarkOpenEvents compares one open transaction of 64 shares with
// webhooks off and on (the events' multi-row insert in the same block).
func BenchmarkOpenEvents(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			db := dbtest.DB(b, "a", 4)
			set := dbtest.UniqueName("be")
			bucket := hongbao.Bucket(rand.IntN(hongbao.Buckets))
			dbtest.Own(b, db, set, []hongbao.Bucket{bucket})
			st := store.New(db, set, dbtest.Shanghai(b), time.Now, rand.Int64N)
			if on {
				st.WithEvents()
			}
			id, err := minter.Next(bucket)
			if err != nil {
				b.Fatal(err)
			}
			n := 64 * (b.N + 1)
			if _, _, err := st.Create(ctx, store.NewPacket{ID: id, Sender: dbtest.FreshUser(), Expiry: time.Hour, Funding: hongbao.Funded,
				Req: hongbao.SendRequest{Total: int64(n), Count: n, Type: hongbao.Fixed}}); err != nil {
				b.Fatal(err)
			}
			users := make([]hongbao.UserID, 64)
			b.ResetTimer()
			for range b.N {
				for i := range users {
					users[i] = dbtest.FreshUser()
				}
				if _, err := st.OpenBatch(ctx, id, users); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
