package statement

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// Formats are the file formats of Write.
var Formats = []string{"csv", "json"}

// timeFormat writes times as RFC 3339 in UTC with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// CSVHeader is the header of the CSV form: one table, a row per entry
// (record "entry"), per kind's total ("total": count and amount), per
// kind's total as the SETs count it ("sets_total"), per kind's moves in
// flight ("in_flight": recorded by the SETs, not delivered to the ledger
// yet), per user touched ("balance": opening and closing) and per
// disagreement ("problem": its key, amount and detail), so a spreadsheet
// or a database loads it as one table and filters on record.
var CSVHeader = []string{"record", "seq", "at", "user", "kind", "amount", "count", "packet", "key", "opening", "closing", "detail"}

// WriteCSV writes st as CSV.
func (st *Statement) WriteCSV(w io.Writer) error {
	c := csv.NewWriter(w)
	_ = c.Write(CSVHeader) // errors stick: Flush and Error report them
	for _, e := range st.Entries {
		_ = c.Write([]string{"entry", strconv.FormatInt(e.Seq, 10), e.At.UTC().Format(timeFormat), e.User.String(), e.Kind,
			strconv.FormatInt(e.Amount, 10), "", e.Packet.String(), e.Key, "", "", ""})
	}
	for _, side := range []struct {
		record string
		totals map[string]Total
	}{{"total", st.Totals}, {"sets_total", st.SETs}, {"in_flight", st.InFlight}} {
		for _, k := range slices.Sorted(maps.Keys(side.totals)) {
			t := side.totals[k]
			_ = c.Write([]string{side.record, "", "", "", k, strconv.FormatInt(t.Sum, 10), strconv.Itoa(t.N), "", "", "", "", ""})
		}
	}
	for _, b := range st.Balances {
		_ = c.Write([]string{"balance", "", "", b.User.String(), "", "", "", "", "", strconv.FormatInt(b.Opening, 10), strconv.FormatInt(b.Closing, 10), ""})
	}
	for _, p := range st.Problems {
		_ = c.Write([]string{"problem", "", "", "", "", strconv.FormatInt(p.Amount, 10), "", "", p.Key, "", "", p.Detail})
	}
	c.Flush()
	if err := c.Error(); err != nil {
		return fmt.Errorf("statement: csv: %w", err)
	}
	return nil
}

// JSON is the JSON form of a statement (IDs as decimal strings).
type JSON struct {
	Day      string           `json:"day"`
	From     string           `json:"from"`
	To       string           `json:"to"`
	Entries  []EntryJSON      `json:"entries"`
	Totals   map[string]Total `json:"totals"`
	SETs     map[string]Total `json:"sets_totals,omitempty"`
	InFlight map[string]Total `json:"in_flight,omitempty"`
	Balances []BalanceJSON    `json:"balances"`
	Problems []string         `json:"problems,omitempty"`
	More     bool             `json:"more,omitempty"` // entries left out of the list (the totals count them)
}

// EntryJSON is a ledger entry.
type EntryJSON struct {
	Seq    int64  `json:"seq"`
	At     string `json:"at"`
	User   string `json:"user"`
	Kind   string `json:"kind"`
	Amount int64  `json:"amount"`
	Packet string `json:"packet,omitempty"`
	Key    string `json:"key"`
}

// BalanceJSON is a user's opening and closing balance.
type BalanceJSON struct {
	User    string `json:"user"`
	Opening int64  `json:"opening"`
	Closing int64  `json:"closing"`
}

// JSON returns st's JSON form.
func (st *Statement) JSON() JSON {
	j := JSON{Day: st.Day, From: st.From.UTC().Format(timeFormat), To: st.To.UTC().Format(timeFormat), Totals: st.Totals,
		SETs: st.SETs, InFlight: st.InFlight, Entries: make([]EntryJSON, 0, len(st.Entries)), Balances: make([]BalanceJSON, 0, len(st.Balances))}
	for _, e := range st.Entries {
		p := ""
		if e.Packet != 0 {
			p = e.Packet.String()
		}
		j.Entries = append(j.Entries, EntryJSON{Seq: e.Seq, At: e.At.UTC().Format(timeFormat), User: e.User.String(), Kind: e.Kind,
			Amount: e.Amount, Packet: p, Key: e.Key})
	}
	for _, b := range st.Balances {
		j.Balances = append(j.Balances, BalanceJSON{User: b.User.String(), Opening: b.Opening, Closing: b.Closing})
	}
	for _, p := range st.Problems {
		j.Problems = append(j.Problems, p.String())
	}
	return j
}

// Write writes st in format ("csv" or "json") to w.
func (st *Statement) Write(w io.Writer, format string) error {
	switch format {
	case "csv":
		return st.WriteCSV(w)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st.JSON()); err != nil {
			return fmt.Errorf("statement: json: %w", err)
		}
		return nil
	}
	return fmt.Errorf("statement: format %q is not one of %v", format, Formats)
}

// WriteFile writes st in format to path atomically: a temporary file in
// the same directory, synced, then renamed over path, so a reader (or a
// loader's glob) never sees half a statement.
func (st *Statement) WriteFile(path, format string) (err error) {
	var buf bytes.Buffer
	if err := st.Write(&buf, format); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("statement: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name()) //nolint:errcheck // the error that matters is err
		}
	}()
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("statement: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("statement: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("statement: %w", err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("statement: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("statement: %w", err)
	}
	return nil
}
