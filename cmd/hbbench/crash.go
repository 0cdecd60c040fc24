package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

// crash is one kill -9 of the Redis behind the redis+lua design in the
// middle of a rain: what the clients were told, and what MySQL holds once
// Redis is back and the writers have written everything they still can.
type crash struct {
	acked        int   // shares answered to clients
	ackedFen     int64 // their sum
	stored       int   // shares in MySQL afterwards
	storedFen    int64
	lost         int // answered opened, not in MySQL
	lostFen      int64
	unacked      int    // in MySQL, but the client was answered an error
	errors       int    // client-visible failures (mostly during the outage)
	writerErr    string // first failed write to MySQL, if any
	strandedFen  int64  // money MySQL still counts as remaining that Redis no longer has
	strandedLeft int
}

// crashes kills the store that holds the shares in the middle of a rain,
// for ours (MariaDB: the only copy) and for redis+lua (Redis, with each
// persistence setting the seeds' design is deployed with), and reports what
// the clients were told against what MySQL holds afterwards.
func (e *benchEnv) crashes(ctx context.Context, w io.Writer, withRedis bool) error {
	redis.SetLogger(quiet{}) // the outage's dial errors are counted, not printed
	fmt.Fprintln(w, "\n## kill -9 during a rain (one activity of 500,000 shares, 500 clients for 2 s; the store is killed after 0.7 s and restarted 0.2 s later)")
	fmt.Fprintln(w, "\n| design | killed | shares answered `opened` | in MySQL after restart | answered `opened`, not in MySQL | money lost | in MySQL, answered an error | unsold shares wiped (packet answers sold_out early) | client errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	fmt.Println("crash test: queue, kill -9 of MariaDB...")
	c, err := e.crashOurs(ctx)
	if err != nil {
		return fmt.Errorf("crash test (queue): %w", err)
	}
	c.print(w, "queue", "MariaDB (durable commits)")
	if !withRedis {
		return nil
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return fmt.Errorf("crash test: %w", err)
	}
	for _, s := range []struct {
		name string
		args []string
	}{
		{"Redis, no persistence (appendonly no)", []string{"--appendonly", "no"}},
		{"Redis, AOF fsync every second", []string{"--appendonly", "yes", "--appendfsync", "everysec"}},
	} {
		fmt.Printf("crash test: redis+lua, kill -9 of %s...\n", s.name)
		c, err := e.crashOnce(ctx, s.args)
		if err != nil {
			return fmt.Errorf("crash test (%s): %w", s.name, err)
		}
		c.print(w, "redis+lua", s.name)
	}
	return nil
}

func (c *crash) print(w io.Writer, design, killed string) {
	fmt.Fprintf(w, "| %s | %s | %d (%d fen) | %d (%d fen) | **%d** | **%d fen** | %d | %d shares, %d fen | %d |\n", design, killed,
		c.acked, c.ackedFen, c.stored, c.storedFen, c.lost, c.lostFen, c.unacked, c.strandedLeft, c.strandedFen, c.errors)
	if c.writerErr != "" {
		fmt.Fprintf(w, "|  | first writer error: %s ||||||||\n", strings.ReplaceAll(c.writerErr, "|", "/"))
	}
}

// crashOurs runs the product in process on a private MariaDB and kills
// that MariaDB: every open answered `opened` was committed with its fsync,
// so it must be there after crash recovery.
func (e *benchEnv) crashOurs(ctx context.Context) (*crash, error) {
	m, err := dbtest.Launch()
	if err != nil {
		return nil, err
	}
	defer m.Remove()
	db, err := sqldb.Open(m.DSN, 64)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := fence.Own(ctx, db, benchSet, 1, fence.AllBuckets()); err != nil {
		return nil, err
	}
	ps, err := newPackets(e.minter, 1, 50_000_000, 500_000, hongbao.Random)
	if err != nil {
		return nil, err
	}
	if err := seed(ctx, db, e.loc, ps); err != nil {
		return nil, err
	}
	d := e.newOurs(db, 500)
	defer d.close()
	rec := &recording{design: d, acked: map[hongbao.UserID]int64{}}
	back := make(chan error, 1)
	go func() {
		time.Sleep(700 * time.Millisecond)
		m.Stop() // SIGKILL
		time.Sleep(200 * time.Millisecond)
		back <- m.Restart()
	}()
	r := drive(ctx, rec, 500, 2*time.Second, func() (job, bool) { return job{ps[0].ID, e.nextUser()}, true })
	if err := <-back; err != nil {
		return nil, fmt.Errorf("restart mariadb: %w", err)
	}
	c := &crash{acked: r.opened, ackedFen: r.openedSum, errors: r.errors}
	return c, c.compare(ctx, db, ps[0].ID.Table(e.loc), ps[0].ID, rec.acked)
}

// crashOnce runs one rain against a private redis-server started with
// args, kills it, restarts it on the same port and data, and counts.
func (e *benchEnv) crashOnce(ctx context.Context, args []string) (*crash, error) {
	dir, err := os.MkdirTemp("", "hbbench-redis-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	port, err := dbtest.PickPort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	srv, err := startRedis(ctx, dir, port, args)
	if err != nil {
		return nil, err
	}
	db, err := sqldb.Open(e.dsn, 64)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	d := newRedisDesign(addr, db, e.loc, 4)
	defer d.close()
	rec := &recording{design: d, acked: map[hongbao.UserID]int64{}}
	// An activity far larger than the crowd of the run, so Redis dies with
	// writes queued and shares unsold, as it would in a real rain.
	ps, err := newPackets(e.minter, 1, 50_000_000, 500_000, hongbao.Random)
	if err != nil {
		return nil, err
	}
	if err := seed(ctx, e.admin, e.loc, ps); err != nil {
		return nil, err
	}
	defer func() { _ = cleanup(ctx, e.admin, e.loc, ps) }()
	if err := d.prepare(ctx, ps); err != nil {
		return nil, err
	}
	type restarted struct {
		cmd *exec.Cmd
		err error
	}
	back := make(chan restarted, 1)
	go func() {
		time.Sleep(700 * time.Millisecond)
		_ = srv.Process.Kill() // SIGKILL: what a crash, an OOM kill or a power cut does
		_ = srv.Wait()
		time.Sleep(200 * time.Millisecond)
		cmd, err := startRedis(ctx, dir, port, args)
		back <- restarted{cmd, err}
	}()
	r := drive(ctx, rec, 500, 2*time.Second, func() (job, bool) { return job{ps[0].ID, e.nextUser()}, true })
	rs := <-back
	if rs.err != nil {
		return nil, fmt.Errorf("restart redis: %w", rs.err)
	}
	defer func() { _ = rs.cmd.Process.Kill(); _ = rs.cmd.Wait() }()
	settle(ctx, d)
	c := &crash{acked: r.opened, ackedFen: r.openedSum, errors: r.errors}
	if err := d.writerErr(); err != nil {
		c.writerErr = err.Error()
	}
	t := ps[0].ID.Table(e.loc)
	if err := c.compare(ctx, e.admin, t, ps[0].ID, rec.acked); err != nil {
		return nil, err
	}
	left, err := d.rdb.LLen(ctx, d.keys(ps[0].ID)[0]).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var remCount int
	var remFen int64
	if err := e.admin.QueryRowContext(ctx, "SELECT remaining_count, remaining_amount FROM "+t.Packets()+" WHERE id = ?", ps[0].ID).
		Scan(&remCount, &remFen); err != nil {
		return nil, err
	}
	// What MySQL counts as remaining but Redis no longer holds, beyond the
	// lost acknowledged shares: unsold shares wiped with Redis, so the
	// packet answers sold_out while they were never handed out.
	c.strandedLeft = remCount - int(left) - c.lost
	c.strandedFen = remFen - sumShares(ctx, d, ps[0].ID) - c.lostFen
	return c, nil
}

// compare sets the stored, lost and unacknowledged counts: the shares in
// MySQL against the ones answered.
func (c *crash) compare(ctx context.Context, db *sql.DB, t hongbao.DayTable, id hongbao.PacketID, acked map[hongbao.UserID]int64) error {
	rows, err := queryRetrying(ctx, db, "SELECT user_id, amount FROM "+t.Details()+" WHERE packet_id = ?", id)
	if err != nil {
		return err
	}
	defer rows.Close()
	stored := map[hongbao.UserID]int64{}
	for rows.Next() {
		var u hongbao.UserID
		var a int64
		if err := rows.Scan(&u, &a); err != nil {
			return err
		}
		stored[u] = a
		c.stored++
		c.storedFen += a
		if _, ok := acked[u]; !ok {
			c.unacked++
		}
	}
	for u, a := range acked {
		if stored[u] != a {
			c.lost++
			c.lostFen += a
		}
	}
	return rows.Err()
}

// recording remembers every share a design answered.
type recording struct {
	design
	mu    sync.Mutex
	acked map[hongbao.UserID]int64
}

func (r *recording) open(ctx context.Context, id hongbao.PacketID, u hongbao.UserID) (int64, error) {
	a, err := r.design.open(ctx, id, u)
	if err == nil {
		r.mu.Lock()
		r.acked[u] = a
		r.mu.Unlock()
	}
	return a, err
}

// queryRetrying runs q, retrying while a restarted server still recovers.
func queryRetrying(ctx context.Context, db *sql.DB, q string, args ...any) (*sql.Rows, error) {
	var err error
	for range 100 {
		var rows *sql.Rows
		if rows, err = db.QueryContext(ctx, q, args...); err == nil {
			return rows, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, err
}

// settle waits until the writers have nothing left to write: the restarted
// Redis's write list is empty and stays so (or 30 s have passed).
func settle(ctx context.Context, d *redisDesign) {
	deadline := time.Now().Add(30 * time.Second)
	for quiet := 0; quiet < 10 && time.Now().Before(deadline); {
		var n int64
		var err error
		for i := range d.writers {
			var l int64
			l, err = d.rdb.LLen(ctx, d.writesKey(i)).Result()
			if err != nil {
				break
			}
			n += l
		}
		if err == nil && n == 0 {
			quiet++
		} else {
			quiet = 0
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sumShares is the money of the shares Redis still holds for id.
func sumShares(ctx context.Context, d *redisDesign, id hongbao.PacketID) int64 {
	vals, _ := d.rdb.LRange(ctx, d.keys(id)[0], 0, -1).Result() // empty on error: counted as gone
	var sum int64
	for _, v := range vals {
		n, _ := strconv.ParseInt(v, 10, 64)
		sum += n
	}
	return sum
}

// startRedis starts redis-server on port with its data in dir and waits
// until it answers.
func startRedis(ctx context.Context, dir string, port int, args []string) (*exec.Cmd, error) {
	cmd := exec.Command("redis-server", append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--dir", dir, "--daemonize", "no", "--logfile", dir + "/redis.log"}, args...)...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	defer rdb.Close()
	for range 100 {
		if rdb.Ping(ctx).Err() == nil {
			return cmd, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, fmt.Errorf("redis-server on port %d did not answer", port)
}

// quiet drops go-redis's internal log lines.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
