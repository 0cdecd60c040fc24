package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/hongbao-dev/hongbao/schema"
	"github.com/hongbao-dev/hongbao/set/failover"
	"github.com/hongbao-dev/hongbao/set/move"
	"github.com/hongbao-dev/hongbao/set/topology"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/fence"
	"github.com/hongbao-dev/hongbao/store/migrate"
)

const setUsage = "usage: hbctl set add NAME --servers A,B --mysql DSN [--replicas 'DSN ...'] --memcached A[,B] [--archive DSN] [--weight N] | list [--json] | " +
	"drain NAME [--parallel N] | remove NAME | failover NAME [--to DSN] [--accept-single-copy] | rejoin NAME | " +
	"watch [NAME...] [--after 10s] [--interval 1s] [--probe-timeout 1s] [--accept-single-copy]"

func cmdSet(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageError{setUsage}
	}
	verb, name, rest := args[0], "", args[1:]
	var names []string // watch: the SETs watched
	switch verb {
	case "list":
	case "watch":
		for len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			names, rest = append(names, rest[0]), rest[1:]
		}
	default:
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return usageError{fmt.Sprintf("set %s: the SET's NAME is required (%s)", verb, setUsage)}
		}
		name, rest = rest[0], rest[1:]
	}
	fs := flags("set "+verb, e)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	servers := fs.String("servers", "", "add: the SET's servers, host:port,...")
	dsn := fs.String("mysql", "", "add: the SET's MySQL DSN (user:pass@tcp(host:port)/)")
	replicas := fs.String("replicas", "", "add: the DSNs of its MySQL's replicas, separated by spaces")
	to := fs.String("to", "", "failover: the replica DSN to promote (default: the most advanced replica)")
	single := fs.Bool("accept-single-copy", false, "failover, watch: when no other replica follows the promoted one, "+
		"let it write on one machine (asynchronous replication while it has no replica) instead of waiting for one")
	wo := watchFlags(fs)
	mcs := fs.String("memcached", "", "add: the SET's memcached, host:port,...")
	archive := fs.String("archive", "", "add: the SET's archive DSN (default: its MySQL)")
	weight := fs.Int("weight", 1, "add: the SET's share of the load relative to the others (1..100)")
	asJSON := fs.Bool("json", false, "list: print JSON")
	parallel := fs.Int("parallel", 1, "drain: buckets moved at once (1..32)")
	grace := fs.Duration("grace", 3*time.Second, "drain: how long the source keeps a moved bucket's rows")
	if err := parse(fs, rest); err != nil {
		return err
	}
	if *parallel < 1 || *parallel > 32 {
		return usageError{"flag --parallel: must be between 1 and 32"}
	}
	switch verb {
	case "add":
		s, err := newSet(name, *servers, *dsn, *mcs, *archive, *weight)
		if err != nil {
			return err
		}
		if s.Replicas, err = replicaDSNs(*replicas); err != nil {
			return err
		}
		return setAdd(ctx, e, *cfgPath, s)
	case "failover", "rejoin":
		return cmdFailover(ctx, e, verb, name, *cfgPath, failover.Options{To: *to, SingleCopy: *single})
	case "watch":
		wo.SingleCopy = *single
		return cmdSetWatch(ctx, e, *cfgPath, names, *wo)
	case "list", "drain", "remove":
	default:
		return usageError{setUsage}
	}
	o, err := openOps(ctx, *cfgPath, e, time.Now)
	if err != nil {
		return err
	}
	defer o.Close()
	switch verb {
	case "list":
		return o.setList(ctx, e, *asJSON)
	case "drain":
		return o.drain(ctx, e, name, *parallel, *grace)
	}
	return o.remove(ctx, e, name)
}

// newSet checks add's flags, naming the bad one.
func newSet(name, servers, dsn, mcs, archive string, weight int) (topology.Set, error) {
	s := topology.Set{Name: name, MySQLDSN: dsn, ArchiveDSN: archive, Weight: weight, State: topology.Active}
	if !topology.ValidName(name) {
		return s, usageError{fmt.Sprintf("set add: NAME %q: lower-case letters, digits, - and _, at most 32, starting with a letter", name)}
	}
	for _, f := range []struct {
		flag, val string
		into      *[]string
	}{{"servers", servers, &s.Servers}, {"memcached", mcs, &s.Memcached}} {
		if f.val == "" {
			return s, usageError{fmt.Sprintf("flag --%s: required (host:port,...)", f.flag)}
		}
		for _, a := range strings.Split(f.val, ",") {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return s, usageError{fmt.Sprintf("flag --%s: %q is not host:port", f.flag, a)}
			}
			*f.into = append(*f.into, a)
		}
	}
	for _, f := range []struct{ flag, val string }{{"mysql", dsn}, {"archive", archive}} {
		if f.val == "" && f.flag == "archive" {
			continue
		}
		if _, err := mysql.ParseDSN(f.val); err != nil || f.val == "" {
			return s, usageError{fmt.Sprintf("flag --%s: not a MySQL DSN (user:pass@tcp(host:port)/): %q", f.flag, f.val)}
		}
	}
	if weight < 1 || weight > 100 {
		return s, usageError{"flag --weight: must be between 1 and 100"}
	}
	return s, nil
}

// setAdd creates the SET's bookkeeping and fence in its MySQL (owning
// nothing), then records it in the meta database.
func setAdd(ctx context.Context, e *env, cfgPath string, s topology.Set) error {
	o, err := openOps(ctx, cfgPath, e, time.Now)
	if err != nil {
		return err
	}
	defer o.Close()
	side, err := o.Fleet.Side(&s)
	if err != nil {
		return err
	}
	if err := schema.EnsureSet(ctx, side.Live); err != nil {
		return fmt.Errorf("SET %s's MySQL: %w", s.Name, err)
	}
	v, err := topology.AddSet(ctx, o.Meta, s)
	if errors.Is(err, topology.ErrSetExists) {
		return usageError{fmt.Sprintf("set add: a SET named %q exists", s.Name)}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "SET %s added at topology version %d; it owns no buckets.\n"+
		"Start its servers (hbserver -set %s) and settler, then: hbctl rebalance plan; hbctl rebalance apply\n", s.Name, v, s.Name)
	return nil
}

// setInfo is one SET in `set list`.
type setInfo struct {
	Name      string   `json:"name"`
	State     string   `json:"state"`
	Weight    int      `json:"weight"`
	Buckets   int      `json:"buckets"`
	Packets   int64    `json:"packets"` // estimates from the table statistics
	Rows      int64    `json:"rows"`
	Servers   []string `json:"servers"`
	Ready     int      `json:"servers_ready"`
	MySQL     string   `json:"mysql"` // "ok" or the error
	Memcached string   `json:"memcached"`
}

func (o *ops) setList(ctx context.Context, e *env, asJSON bool) error {
	t, err := topology.Load(ctx, o.Meta)
	if err != nil {
		return err
	}
	infos := make([]setInfo, len(t.Sets))
	var wg sync.WaitGroup
	for i := range t.Sets {
		wg.Go(func() { infos[i] = o.inspect(ctx, t, &t.Sets[i]) })
	}
	wg.Wait()
	if asJSON {
		return writeJSON(e, struct {
			Version int64     `json:"version"`
			Sets    []setInfo `json:"sets"`
		}{t.Version, infos})
	}
	fmt.Fprintf(e.stdout, "topology version %d\n%-10s %-9s %6s %7s %10s %10s %8s  %-6s %s\n", t.Version,
		"SET", "state", "weight", "buckets", "~packets", "~rows", "servers", "mysql", "memcached")
	for _, s := range infos {
		fmt.Fprintf(e.stdout, "%-10s %-9s %6d %7d %10d %10d %4d/%-3d  %-6s %s\n", s.Name, s.State, s.Weight, s.Buckets, s.Packets, s.Rows,
			s.Ready, len(s.Servers), s.MySQL, s.Memcached)
	}
	return nil
}

// inspect measures one SET: its buckets' usage and its parts' health.
func (o *ops) inspect(ctx context.Context, t *topology.Map, s *topology.Set) setInfo {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	in := setInfo{Name: s.Name, State: s.State, Weight: s.Weight, Servers: s.Servers, MySQL: "ok", Memcached: "ok"}
	bs := t.Buckets(s.Name)
	in.Buckets = len(bs)
	if side, err := o.Fleet.Side(s); err != nil {
		in.MySQL = err.Error()
	} else if us, err := migrate.Usages(ctx, side.Live, o.cfg.Location(), time.Now()); err != nil {
		in.MySQL = err.Error()
	} else {
		for _, b := range bs {
			in.Packets += us[b].Packets
			in.Rows += us[b].Rows
		}
	}
	var down []string
	for _, a := range s.Memcached {
		c, err := net.DialTimeout("tcp", a, time.Second)
		if err != nil {
			down = append(down, a)
			continue
		}
		c.Close()
	}
	if len(down) > 0 {
		in.Memcached = "down: " + strings.Join(down, ",")
	}
	client := &http.Client{Timeout: time.Second}
	for _, a := range s.Servers {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a+"/readyz", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				in.Ready++
			}
		}
	}
	return in
}

// drain marks the SET draining and moves every bucket off it.
func (o *ops) drain(ctx context.Context, e *env, name string, parallel int, grace time.Duration) error {
	release, err := o.LockIdle(ctx)
	if err != nil {
		return err
	}
	defer release()
	if _, err := topology.SetState(ctx, o.Meta, name, topology.Draining, 0); errors.Is(err, topology.ErrNoSet) {
		return usageError{fmt.Sprintf("set drain: no SET named %q", name)}
	} else if err != nil {
		return err
	}
	_, moves, shares, err := o.Plan(ctx)
	if err != nil {
		return err
	}
	var off []topology.PlannedMove
	for _, m := range moves {
		if m.From == name {
			off = append(off, m)
		}
	}
	showPlan(e, off, shares)
	if len(off) == 0 {
		return nil
	}
	r, err := o.Journal.Create(ctx, "drain", 0, "drains SET "+name, move.PlannedMoves(off))
	if err != nil {
		return err
	}
	return o.run(ctx, e, r, parallel, grace)
}

// remove forgets a SET that owns no bucket and owes nothing (store.Owes):
// its outbox (credits and refunds not yet in the wallet) and its webhook
// events, pending or failed, must be delivered first.
func (o *ops) remove(ctx context.Context, e *env, name string) error {
	t, err := topology.Load(ctx, o.Meta)
	if err != nil {
		return err
	}
	s, ok := t.Set(name)
	if !ok {
		return usageError{fmt.Sprintf("set remove: no SET named %q", name)}
	}
	if n := len(t.Buckets(name)); n > 0 {
		return fmt.Errorf("SET %s owns %d buckets: hbctl set drain %s first", name, n, name)
	}
	side, err := o.Fleet.Side(s)
	if err != nil {
		return err
	}
	if err := store.New(side.Live, name, o.cfg.Location(), time.Now, nil).Owes(ctx); err != nil {
		return fmt.Errorf("set remove: %w", err)
	}
	v, err := topology.RemoveSet(ctx, o.Meta, name)
	if err != nil {
		return err
	}
	if err := fence.Forget(ctx, side.Live, name); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "SET %s removed at topology version %d; stop its processes.\n", name, v)
	return nil
}
