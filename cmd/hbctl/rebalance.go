package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/lease"
	"github.com/hongbao-dev/hongbao/set/move"
	"github.com/hongbao-dev/hongbao/set/topology"
	"go.uber.org/zap"
)

const rebalanceUsage = "usage: hbctl rebalance plan [--json] | apply [--parallel N] [--dry-run] [--grace 3s] | status [--json] | reverse [--parallel N]"

// ops is what the rebalance and set commands share: the configuration,
// and the meta database, its journal and the SETs' pools (move.Operator).
type ops struct {
	*move.Operator
	cfg *configs.Config
}

// openOps opens the operator's moves; now is the wall clock their
// journal's leases are stamped with (they are read on other hosts).
func openOps(ctx context.Context, cfgPath string, e *env, now func() time.Time) (*ops, error) {
	cfg, err := configs.Load(cfgPath, e.environ)
	if err != nil {
		return nil, err
	}
	if cfg.MetaDSN == "" {
		return nil, errors.New("the configuration names no meta_dsn: a fleet without a topology cannot be rebalanced")
	}
	op, err := move.OpenOperator(ctx, cfg.MetaDSN, cfg.CoreMembers(), cfg.Location(), now)
	if err != nil {
		return nil, err
	}
	// Each bucket's move takes its etcd lease first when etcd is
	// configured: no two movers on one bucket, on any host.
	if op.Leases, err = lease.Open(ctx, cfg.Etcd, zap.NewNop()); err != nil {
		op.Close()
		return nil, fmt.Errorf("etcd: %w", err)
	}
	op.Holder = lease.Holder()
	return &ops{Operator: op, cfg: cfg}, nil
}

// mover builds the mover of an apply, printing its progress on stdout.
func (o *ops) mover(e *env, parallel int, grace time.Duration) *move.Mover {
	mv := o.Mover(parallel, grace)
	mv.Report = newReporter(e.stdout, time.Now)
	return mv
}

// run applies r with a mover of parallel and grace.
func (o *ops) run(ctx context.Context, e *env, r *topology.Rebalance, parallel int, grace time.Duration) error {
	return o.mover(e, parallel, grace).Apply(ctx, r)
}

func cmdRebalance(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usageError{rebalanceUsage}
	}
	fs := flags("rebalance "+args[0], e)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	asJSON := fs.Bool("json", false, "plan, status: print JSON")
	parallel := fs.Int("parallel", 1, "apply, reverse: buckets moved at once (1..32)")
	dryRun := fs.Bool("dry-run", false, "apply: print the plan, move nothing")
	grace := fs.Duration("grace", 3*time.Second, "apply, reverse: how long the source keeps a moved bucket's rows for servers still on the old topology")
	offset := configs.ClockOffsetFlag(fs) // the moves' leases
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	if *parallel < 1 || *parallel > 32 {
		return usageError{"flag --parallel: must be between 1 and 32"}
	}
	if *grace < 0 {
		return usageError{"flag --grace: must not be negative"}
	}
	o, err := openOps(ctx, *cfgPath, e, clock(e, *offset))
	if err != nil {
		return err
	}
	defer o.Close()
	switch args[0] {
	case "plan":
		return o.printPlan(ctx, e, *asJSON)
	case "apply":
		return o.apply(ctx, e, "apply", *parallel, *grace, *dryRun)
	case "status":
		return o.status(ctx, e, *asJSON)
	case "reverse":
		return o.reverse(ctx, e, *parallel, *grace)
	}
	return usageError{rebalanceUsage}
}

func (o *ops) printPlan(ctx context.Context, e *env, asJSON bool) error {
	t, moves, shares, err := o.Plan(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e, struct {
			Version int64                  `json:"version"`
			Moves   []topology.PlannedMove `json:"moves"`
			Sets    []topology.Share       `json:"sets"`
		}{t.Version, moves, shares})
	}
	showPlan(e, moves, shares)
	return nil
}

// showPlan prints the moves (each one when they are few, by pair of SETs
// otherwise) and the SETs' shares before and after.
func showPlan(e *env, moves []topology.PlannedMove, shares []topology.Share) {
	if len(moves) == 0 {
		fmt.Fprintln(e.stdout, "the fleet is balanced: nothing to move")
	} else if len(moves) <= 30 {
		fmt.Fprintf(e.stdout, "%d moves:\n%-7s %-10s %-10s %10s %10s\n", len(moves), "bucket", "from", "to", "packets", "rows")
		for _, m := range moves {
			fmt.Fprintf(e.stdout, "%-7d %-10s %-10s %10d %10d\n", m.Bucket, m.From, m.To, m.Load.Packets, m.Load.Rows)
		}
	} else {
		type pair struct{ from, to string }
		var order []pair
		groups := map[pair][]topology.PlannedMove{}
		for _, m := range moves {
			p := pair{m.From, m.To}
			if _, ok := groups[p]; !ok {
				order = append(order, p)
			}
			groups[p] = append(groups[p], m)
		}
		fmt.Fprintf(e.stdout, "%d moves:\n%-10s %-10s %8s %10s %10s  buckets\n", len(moves), "from", "to", "buckets", "packets", "rows")
		for _, p := range order {
			var packets, rows int64
			var bs []hongbao.Bucket
			for _, m := range groups[p] {
				packets += m.Load.Packets
				rows += m.Load.Rows
				bs = append(bs, m.Bucket)
			}
			fmt.Fprintf(e.stdout, "%-10s %-10s %8d %10d %10d  %s\n", p.from, p.to, len(bs), packets, rows, ranges(bs))
		}
	}
	fmt.Fprintf(e.stdout, "\n%-10s %-9s %6s %20s %22s\n", "SET", "state", "weight", "buckets (target)", "data (rows, recent)")
	for _, s := range shares {
		fmt.Fprintf(e.stdout, "%-10s %-9s %6d %5d -> %4d (%4.0f) %9.1f%% -> %5.1f%%\n", s.Name, s.State, s.Weight,
			s.BucketsBefore, s.After, s.Target*hongbao.Buckets, 100*s.LoadBefore, 100*s.LoadAfter)
	}
}

// apply continues the unfinished rebalance, or plans and applies a new one.
func (o *ops) apply(ctx context.Context, e *env, kind string, parallel int, grace time.Duration, dryRun bool) error {
	release, err := o.Journal.Lock(ctx)
	if err != nil {
		return err
	}
	defer release()
	r, err := o.Journal.Unfinished(ctx)
	if err != nil {
		return err
	}
	if r != nil {
		fmt.Fprintf(e.stderr, "continuing rebalance %d (%s, begun %s)\n", r.ID, r.Kind, r.CreatedAt.Format(time.RFC3339))
		if dryRun {
			return o.showStatus(e, r)
		}
	} else {
		_, moves, shares, err := o.Plan(ctx)
		if err != nil {
			return err
		}
		if dryRun || len(moves) == 0 {
			showPlan(e, moves, shares)
			return nil
		}
		if r, err = o.Journal.Create(ctx, kind, 0, "", move.PlannedMoves(moves)); err != nil {
			return err
		}
	}
	return o.run(ctx, e, r, parallel, grace)
}

// reverse moves back the buckets of the last finished rebalance that are
// still where it put them.
func (o *ops) reverse(ctx context.Context, e *env, parallel int, grace time.Duration) error {
	release, err := o.LockIdle(ctx)
	if err != nil {
		return err
	}
	defer release()
	r, err := o.Reversal(ctx)
	if err != nil {
		return err
	}
	return o.run(ctx, e, r, parallel, grace)
}

func (o *ops) status(ctx context.Context, e *env, asJSON bool) error {
	r, err := o.Journal.Latest(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(e, statusJSON(r))
	}
	if r == nil {
		fmt.Fprintln(e.stdout, "no rebalance yet")
		return nil
	}
	return o.showStatus(e, r)
}

func (o *ops) showStatus(e *env, r *topology.Rebalance) error {
	s := statusJSON(r)
	fmt.Fprintf(e.stdout, "rebalance %d (%s) %s, begun %s, updated %s\n", r.ID, r.Kind, r.State,
		r.CreatedAt.Format(time.RFC3339), r.UpdatedAt.Format(time.RFC3339))
	if r.Note != "" {
		fmt.Fprintf(e.stdout, "  %s\n", r.Note)
	}
	fmt.Fprintf(e.stdout, "  %d of %d buckets done, %d rows copied of ~%d planned\n", s.Done, s.Moves, s.RowsCopied, s.RowsPlanned)
	var steps []string
	for _, st := range stepOrder {
		if n := s.Steps[st]; n > 0 {
			steps = append(steps, fmt.Sprintf("%s %d", st, n))
		}
	}
	fmt.Fprintf(e.stdout, "  steps: %s\n", strings.Join(steps, ", "))
	fmt.Fprintf(e.stdout, "  freeze p50 %d ms, p99 %d ms, max %d ms\n", s.FreezeP50, s.FreezeP99, s.FreezeMax)
	for _, m := range r.Moves {
		if m.Step != topology.Done && m.Step != topology.Planned {
			fmt.Fprintf(e.stdout, "  bucket %-4d %s -> %s  %-11s rows %d passes %d %s\n", m.Bucket, m.From, m.To, m.Step, m.RowsCopied, m.Passes, m.Error)
		}
	}
	return nil
}

var stepOrder = []string{topology.Planned, topology.Copying, topology.CatchingUp, topology.Frozen, topology.Disowning,
	topology.Published, topology.Done, topology.Failed}

// rebalanceStatus is `rebalance status --json`.
type rebalanceStatus struct {
	ID          int64            `json:"id"`
	Kind        string           `json:"kind"`
	State       string           `json:"state"`
	Reverses    int64            `json:"reverses,omitempty"`
	CreatedAt   time.Time        `json:"created_at"`
	UpdatedAt   time.Time        `json:"updated_at"`
	Moves       int              `json:"moves"`
	Done        int              `json:"done"`
	RowsPlanned int64            `json:"rows_planned"`
	RowsCopied  int64            `json:"rows_copied"`
	Steps       map[string]int   `json:"steps"`
	FreezeP50   int              `json:"freeze_ms_p50"`
	FreezeP99   int              `json:"freeze_ms_p99"`
	FreezeMax   int              `json:"freeze_ms_max"`
	List        []moveStatusJSON `json:"list"`
}

type moveStatusJSON struct {
	Bucket     int    `json:"bucket"`
	From       string `json:"from"`
	To         string `json:"to"`
	Step       string `json:"step"`
	RowsCopied int64  `json:"rows_copied"`
	Passes     int    `json:"passes"`
	FreezeMS   int    `json:"freeze_ms"`
	Error      string `json:"error,omitempty"`
}

func statusJSON(r *topology.Rebalance) *rebalanceStatus {
	if r == nil {
		return nil
	}
	s := &rebalanceStatus{ID: r.ID, Kind: r.Kind, State: r.State, Reverses: r.Reverses, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Moves: len(r.Moves), Steps: map[string]int{}}
	for _, m := range r.Moves {
		s.Steps[m.Step]++
		s.RowsPlanned += m.RowsPlanned
		s.RowsCopied += m.RowsCopied
		if m.Step == topology.Done {
			s.Done++
		}
		s.List = append(s.List, moveStatusJSON{int(m.Bucket), m.From, m.To, m.Step, m.RowsCopied, m.Passes, m.FreezeMS, m.Error})
	}
	fs := Freezes(r)
	s.FreezeP50, s.FreezeP99 = Percentile(fs, 50), Percentile(fs, 99)
	if len(fs) > 0 {
		s.FreezeMax = fs[len(fs)-1]
	}
	return s
}

func writeJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// lookup is the value of the environment variable name in environ ("" when unset).
func lookup(environ []string, name string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}
