package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/sqldb"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// BenchmarkCommitCost measures what MariaDB spends, in CPU, on the round
// trips and commits of a SET's open transactions, on a replicated pair
// set up as every hongbao SET database is (binary log and redo flushed at
// every commit, semi-sync replication waiting AFTER_SYNC; the test
// harness's small buffer pool and redo log): a statement alone (SELECT 1),
// a transaction of one INSERT, and the open transaction of a hot packet
// (known to its server: begin, the write block, commit) carrying 1 and 25
// opens, the settler's read and delete of 250 of their credits, and the
// wallet transaction recording 250 credits. It
// reports the primary's and the replica's CPU per operation and per open, the figures that set MariaDB's share of a hot open end to end
// (BENCHMARKS.md, "the cost of a commit").
//
//	go test -run '^$' -bench BenchmarkCommitCost -benchtime 2000x ./store
func BenchmarkCommitCost(b *testing.B) {
	g := dbtest.StartReplicated(b, 0, 1)
	ctx := context.Background()
	db, err := sqldb.Open(g.Primary.DSN, 4)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if err := schema.EnsureSet(ctx, db); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS hb_set.bench_rows (id BIGINT AUTO_INCREMENT PRIMARY KEY, v BIGINT NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	set, bucket := dbtest.UniqueName("cc"), hongbao.Bucket(rand.IntN(hongbao.Buckets))
	dbtest.Own(b, db, set, []hongbao.Bucket{bucket})
	st := store.New(db, set, dbtest.Shanghai(b), time.Now, rand.Int64N)

	b.Run("select1", func(b *testing.B) {
		measureCommits(b, g, 0, func() error {
			var one int
			return db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
		})
	})
	b.Run("insert-tx", func(b *testing.B) {
		measureCommits(b, g, 0, func() error {
			return sqldb.InTx(ctx, db, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, "INSERT INTO hb_set.bench_rows (v) VALUES (?)", rand.Int64())
				return err
			})
		})
	})
	for _, opens := range []int{1, 25} {
		b.Run(fmt.Sprintf("open-tx/%d", opens), func(b *testing.B) {
			hot := newHotPacket(b, st, bucket)
			measureCommits(b, g, opens, func() error { return hot.open(ctx, opens) })
		})
		b.Run(fmt.Sprintf("open-tx-read/%d", opens), func(b *testing.B) {
			hot := newHotPacket(b, st, bucket)
			hot.unknown = true
			measureCommits(b, g, opens, func() error { return hot.open(ctx, opens) })
		})
	}
	// The settler's side of the same opens: a delivery reads up to 250
	// outbox credits and deletes their rows once the wallet has them (the
	// wallet's own transaction is not in it), the credits a row each (as
	// before packing) and packed 25 a row (as an open transaction of 25
	// opens of one packet writes them). The outbox is filled before, for up
	// to 2,000 deliveries (b.N is not known before b.Loop).
	for _, per := range []int{1, 25} {
		b.Run(fmt.Sprintf("settle/250/packed-%d", per), func(b *testing.B) {
			const credits, deliveries = 250, 2000
			fillOutbox(b, db, set, deliveries*credits, per)
			waitApplied(b, g)
			measureCommits(b, g, credits, func() error {
				out, err := st.Outbox(ctx, credits)
				if err != nil || len(out) != credits {
					return fmt.Errorf("outbox: %d credits, %v (at most %d deliveries: -benchtime %dx)", len(out), err, deliveries, deliveries)
				}
				ids := make([]int64, 0, len(out))
				for i, r := range out {
					if i == 0 || r.ID != out[i-1].ID {
						ids = append(ids, r.ID)
					}
				}
				return st.Delivered(ctx, ids)
			})
		})
	}
	// The core group's side of the same opens: a settler's wallet
	// transaction recording 250 credits of fresh users (a ledger row each,
	// and a new balance), on a pair of its own with a cluster's buffer pool:
	// with the harness's 32 MB the ledger's indexes, which fresh users hit
	// at random places, outgrow it within 100,000 credits, and the figure is
	// page reads (290 us a credit on the primary, against 36 with 1 GB).
	b.Run("wallet-credit/250", func(b *testing.B) {
		const credits = 250
		g := dbtest.StartReplicated(b, 0, 1, "--innodb-buffer-pool-size=1G")
		w, err := wallet.Open(ctx, g.Primary.DSN+"hb_wallet", nil, 4, time.Now)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { w.Close() })
		measureCommits(b, g, credits, func() error {
			es := make([]hongbao.Entry, credits)
			for i := range es {
				u := dbtest.FreshUser()
				es[i] = hongbao.Entry{Key: hongbao.OpenKey(1, u), User: u, Amount: 100, Kind: hongbao.KindOpen, Packet: 1}
			}
			c, err := w.Credit(ctx, es)
			if err == nil && len(c.Fresh) != credits {
				err = fmt.Errorf("%d of %d credits recorded", len(c.Fresh), credits)
			}
			return err
		})
	})
}

// fillOutbox writes n credits of fresh users to set's outbox, as open
// transactions leave them: per credits a row (packed when more than one),
// 500 rows a statement.
func fillOutbox(b *testing.B, db *sql.DB, set string, n, per int) {
	b.Helper()
	var q strings.Builder
	var args []any
	flush := func() {
		if len(args) == 0 {
			return
		}
		if _, err := db.Exec("INSERT INTO hb_set.outbox (entry_key, user_id, amount, kind, packet_id, created_at, set_name, n, shares) VALUES "+
			strings.TrimSuffix(q.String(), ","), args...); err != nil {
			b.Fatal(err)
		}
		q.Reset()
		args = args[:0]
	}
	for rows := 0; n > 0; rows++ {
		k := min(n, per)
		u := dbtest.FreshUser()
		if k == 1 {
			q.WriteString("(?,?,100,'open',1,UTC_TIMESTAMP(3),?,1,NULL),")
			args = append(args, hongbao.OpenKey(1, u), u, set)
		} else {
			pairs := make([]string, k)
			for i := range pairs {
				pairs[i] = fmt.Sprintf("%d:100", u+hongbao.UserID(i))
			}
			q.WriteString("(?,0,?,'open',1,UTC_TIMESTAMP(3),?,?,?),")
			args = append(args, "opens:1", 100*k, set+"/packed", k, strings.Join(pairs, ","))
		}
		n -= k
		if rows%500 == 499 {
			flush()
		}
	}
	flush()
}

// measureCommits runs op b.N times and reports the CPU the group's primary
// and replica spent on them (the replica's once it has applied them all),
// per operation and, when opens > 0, per open.
func measureCommits(b *testing.B, g *dbtest.Group, opens int, op func() error) {
	b.Helper()
	members := g.Members()
	before := make([]time.Duration, len(members))
	for i, m := range members {
		var err error
		if before[i], err = m.CPU(); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	waitApplied(b, g)
	for i, m := range members {
		after, err := m.CPU()
		if err != nil {
			b.Fatal(err)
		}
		us := float64((after - before[i]).Microseconds()) / float64(b.N)
		name := "primary"
		if i > 0 {
			name = "replica"
		}
		b.ReportMetric(us, name+"-cpu-us/op")
		if opens > 0 {
			b.ReportMetric(us/float64(opens), name+"-cpu-us/open")
		}
	}
}

// waitApplied waits until every replica of g has applied what the primary
// has logged.
func waitApplied(b *testing.B, g *dbtest.Group) {
	b.Helper()
	primary := dbtest.Open(b, g.Primary.DSN, 1)
	var pos string
	if err := primary.QueryRow("SELECT @@GLOBAL.gtid_binlog_pos").Scan(&pos); err != nil {
		b.Fatal(err)
	}
	for _, r := range g.Replicas {
		var res sql.NullInt64
		if err := dbtest.Open(b, r.DSN, 1).QueryRow("SELECT MASTER_GTID_WAIT(?, 60)", pos).Scan(&res); err != nil || res.Int64 != 0 {
			b.Fatalf("replica did not apply %s in 60 s: %v (%v)", pos, res, err)
		}
	}
}

// hotPacket is a packet of many shares opened as its server opens a hot
// packet: with the knowledge of its last transaction, so that a
// transaction is begin, the write block and commit.
type hotPacket struct {
	st      *store.Store
	bucket  hongbao.Bucket
	known   *hongbao.Snapshot
	unknown bool // open as a packet the server does not know: begin, the read, the writes, commit
	left    int  // shares the packet has left
	id      hongbao.PacketID
	created func() hongbao.PacketID
}

func newHotPacket(b *testing.B, st *store.Store, bucket hongbao.Bucket) *hotPacket {
	b.Helper()
	h := &hotPacket{st: st, bucket: bucket}
	h.created = func() hongbao.PacketID {
		id, err := minter.Next(bucket)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok, err := st.Create(context.Background(), store.NewPacket{ID: id, Sender: dbtest.FreshUser(),
			Req: hongbao.SendRequest{Total: 100_000_000, Count: 100_000, Type: hongbao.Random}, Expiry: time.Hour, Funding: hongbao.Funded}); err != nil || !ok {
			b.Fatalf("create a packet of 100,000 shares: created %v, %v", ok, err)
		}
		return id
	}
	h.id, h.left = h.created(), 100_000
	return h
}

// open opens the packet for n fresh users in one transaction, starting
// another packet when this one has too few shares left.
func (h *hotPacket) open(ctx context.Context, n int) error {
	if h.left < n {
		h.id, h.known, h.left = h.created(), nil, 100_000
	}
	users := make([]hongbao.UserID, n)
	for i := range users {
		users[i] = dbtest.FreshUser()
	}
	w := store.Work{ID: h.id, Users: users, Known: h.known, OpenersUpTo: 100_000}
	if h.unknown {
		w.Known, w.OpenersUpTo = nil, 0
	}
	bs, err := h.st.OpenMany(ctx, []store.Work{w})
	if err != nil {
		return err
	}
	if bs[0].Packet == nil || bs[0].Openers == nil && !h.unknown {
		return fmt.Errorf("packet %s: no packet or openers after the transaction", h.id)
	}
	for _, o := range bs[0].Outcomes {
		if o.Err != nil {
			return fmt.Errorf("packet %s: open: %w", h.id, o.Err)
		}
	}
	h.left = bs[0].Packet.RemainingCount
	if !h.unknown {
		h.known = &hongbao.Snapshot{Packet: *bs[0].Packet, Openers: bs[0].Openers}
	}
	return nil
}
