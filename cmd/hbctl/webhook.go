package main

import (
	"context"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/set/settings"
	"github.com/hongbao-dev/hongbao/store"
	"github.com/hongbao-dev/hongbao/store/sqldb"
)

const webhookUsage = "usage: hbctl webhook list [--set S] [--state pending|failed] [--type T] [--packet ID] [--limit N] | replay [--set S] [--id EVENT] [--packet ID] [--type T]"

func cmdWebhook(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || (args[0] != "list" && args[0] != "replay") {
		return usageError{webhookUsage}
	}
	fs := flags("webhook "+args[0], e)
	cfgPath := fs.String("config", "configs/dev.yaml", "configuration file")
	set := fs.String("set", "", "only this SET's events (default: every SET's)")
	state := fs.String("state", "", "list: pending or failed (default: both)")
	typ := fs.String("type", "", "only events of this type (packet.sent, packet.opened, ...)")
	packet := fs.String("packet", "", "only this packet's events")
	id := fs.String("id", "", "replay: only the event of this ID")
	limit := fs.Int("limit", 100, "list: at most this many events per SET")
	if err := parse(fs, args[1:]); err != nil {
		return err
	}
	f, err := eventFilter(*state, *typ, *packet, *id, *limit)
	if err != nil {
		return err
	}
	cfg, err := configs.Load(*cfgPath, e.environ)
	if err != nil {
		return err
	}
	sets, err := settings.Sets(ctx, cfg)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', 0)
	defer tw.Flush()
	if args[0] == "list" {
		fmt.Fprintln(tw, "SET\tEVENT\tSTATE\tATTEMPTS\tCREATED\tNEXT\tLAST ERROR")
	}
	found := false
	for _, sc := range sets {
		if *set != "" && sc.Name != *set {
			continue
		}
		found = true
		if err := webhookSet(ctx, e, tw, cfg, sc, args[0], f); err != nil {
			return fmt.Errorf("SET %s: %w", sc.Name, err)
		}
	}
	if !found {
		return usageError{fmt.Sprintf("flag --set: no SET %q", *set)}
	}
	return nil
}

// eventFilter checks the flags and turns them into a filter.
func eventFilter(state, typ, packet, id string, limit int) (store.EventFilter, error) {
	f := store.EventFilter{Type: typ, ID: id, Limit: limit}
	switch state {
	case "":
	case "pending", "failed":
		failed := state == "failed"
		f.Failed = &failed
	default:
		return f, usageError{fmt.Sprintf("flag --state: %q is not pending or failed", state)}
	}
	if typ != "" && !slices.Contains(store.EventTypes(), typ) {
		return f, usageError{fmt.Sprintf("flag --type: %q is not one of %v", typ, store.EventTypes())}
	}
	if packet != "" {
		p, err := hongbao.ParsePacketID(packet)
		if err != nil {
			return f, usageError{fmt.Sprintf("flag --packet: %q is not a packet ID", packet)}
		}
		f.Packet = p
	}
	if limit <= 0 {
		return f, usageError{"flag --limit: must be positive"}
	}
	return f, nil
}

// webhookSet lists or replays one SET's events.
func webhookSet(ctx context.Context, e *env, tw *tabwriter.Writer, cfg *configs.Config, sc configs.Set, verb string, f store.EventFilter) error {
	db, err := sqldb.Open(sc.MySQLDSN, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	st := store.New(db, sc.Name, cfg.Location(), time.Now, nil)
	if verb == "replay" {
		n, err := st.ReplayEvents(ctx, f, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "SET %s: %d failed events pending again (the settler delivers them)\n", sc.Name, n)
		return nil
	}
	evs, err := st.Events(ctx, f)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		state := "pending"
		if ev.Failed {
			state = "failed"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", sc.Name, ev.ID, state, ev.Attempts,
			ev.CreatedAt.UTC().Format(time.RFC3339), ev.NextAt.UTC().Format(time.RFC3339), ev.LastError)
	}
	return nil
}
