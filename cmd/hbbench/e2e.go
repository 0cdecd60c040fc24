package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/wallet"
)

// httpDesign opens through the router over HTTP with keep-alive.
type httpDesign struct {
	url    string
	client *http.Client
	signer *hongbao.Signer
	path   func(id hongbao.PacketID) string // the endpoint measured
}

func (h *httpDesign) name() string                                     { return "http" }
func (h *httpDesign) prepare(context.Context, []*hongbao.Packet) error { return nil }
func (h *httpDesign) drain(context.Context) error                      { return nil }
func (h *httpDesign) close()                                           {}

func (h *httpDesign) open(ctx context.Context, id hongbao.PacketID, u hongbao.UserID) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url+h.path(id), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+h.signer.Sign(u, time.Now().Add(time.Hour)))
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Amount int64  `json:"amount"`
		Code   string `json:"code"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body) // an empty body is judged by its status
	switch {
	case resp.StatusCode == http.StatusOK:
		return body.Amount, nil
	case body.Code == "busy":
		return 0, hongbao.ErrBusy
	case body.Code == "sold_out":
		return 0, hongbao.ErrSoldOut
	}
	return 0, fmt.Errorf("HTTP %d %s", resp.StatusCode, body.Code)
}

// endToEnd runs hot and group through the router, the no-op ceiling of the
// same stack, and wrk.
func endToEnd(ctx context.Context, o options, e *benchEnv, w io.Writer) error {
	clients := min(o.clients, 512)
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients, IdleConnTimeout: time.Minute}
	hd := &httpDesign{url: strings.TrimRight(o.e2e, "/"), client: &http.Client{Transport: tr, Timeout: 20 * time.Second},
		signer: hongbao.NewSigner([]byte(e.cfg.Secret))}
	sender := hongbao.UserID(7_000_000_001)
	if err := topUp(ctx, e, sender, 1e11); err != nil {
		return err
	}
	hot, err := hd.send(ctx, sender, 2_000_000, 1_000_000)
	if err != nil {
		return fmt.Errorf("e2e hot packet (start the cluster with activity limits: make bench-compare does): %w", err)
	}
	fmt.Fprintf(w, "\n## end to end through the router (%d keep-alive clients, Go client)\n\n", clients)
	fmt.Fprintln(w, "| run | answers | req/s | p50 | p99 | p99.9 | busy retries | errors |\n|---|---|---|---|---|---|---|---|")
	row := func(name string, r *result) {
		fmt.Fprintf(w, "| %s | %d | %.0f | %s | %s | %s | %d | %d |\n", name, r.answers, r.rate(), ms(r.pct(.5)), ms(r.pct(.99)), ms(r.pct(.999)), r.busy, r.errors)
	}
	fmt.Println("e2e: hot open...")
	hd.path = func(id hongbao.PacketID) string { return "/v1/packets/" + id.String() + "/open" }
	rHot := drive(ctx, hd, clients, o.hotDur, func() (job, bool) { return job{hot, e.nextUser()}, true })
	row("hot open", rHot)
	fmt.Println("e2e: no-op ceiling...")
	hd.path = func(hongbao.PacketID) string { return "/v1/ping" }
	rNoop := drive(ctx, hd, clients, o.hotDur, func() (job, bool) { return job{hot, e.nextUser()}, true })
	row("no-op ceiling (POST /v1/ping, router + server)", rNoop)
	fmt.Println("e2e: group...")
	var js []job
	var ids []hongbao.PacketID
	for range 1000 {
		id, err := hd.send(ctx, sender, 1000, 10)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	for range 25 {
		for _, id := range ids {
			js = append(js, job{id, e.nextUser()})
		}
	}
	hd.path = func(id hongbao.PacketID) string { return "/v1/packets/" + id.String() + "/open" }
	rGroup := drive(ctx, hd, clients, o.capDur, list(js))
	row("group open (1,000 packets x 10 shares, 25 openers)", rGroup)
	fmt.Fprintf(w, "\nend-to-end hot opens/s = %.0f%% of the no-op ceiling\n", 100*rHot.rate()/rNoop.rate())
	if o.wrk {
		return runWrk(ctx, o, hd, hot, e, w)
	}
	return nil
}

func topUp(ctx context.Context, e *benchEnv, u hongbao.UserID, amount int64) error {
	wal, err := wallet.Open(ctx, e.cfg.WalletDSN, 2, time.Now)
	if err != nil {
		return err
	}
	defer wal.Close()
	_, _, err = wal.Apply(ctx, hongbao.Entry{Key: fmt.Sprintf("topup:bench:%d", time.Now().UnixNano()), User: u, Amount: amount, Kind: hongbao.KindTopUp})
	return err
}

// send creates a packet through the router.
func (h *httpDesign) send(ctx context.Context, sender hongbao.UserID, total int64, count int) (hongbao.PacketID, error) {
	body := fmt.Sprintf(`{"total":%d,"count":%d,"type":"random"}`, total, count)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/v1/packets", bytes.NewBufferString(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+h.signer.Sign(sender, time.Now().Add(time.Hour)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return 0, fmt.Errorf("send: HTTP %d: %s", resp.StatusCode, raw)
	}
	var p struct{ ID string }
	if err := json.Unmarshal(raw, &p); err != nil {
		return 0, err
	}
	return hongbao.ParsePacketID(p.ID)
}

var wrkRate = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

// runWrk drives the open endpoint of the hot packet with wrk, an
// independent client, cycling through pre-signed tokens of fresh users.
func runWrk(ctx context.Context, o options, hd *httpDesign, hot hongbao.PacketID, e *benchEnv, w io.Writer) error {
	if _, err := exec.LookPath("wrk"); err != nil {
		fmt.Fprintln(w, "\nwrk: not installed (apt-get install wrk); skipped")
		return nil
	}
	var lua strings.Builder
	lua.WriteString("local t = {\n")
	for range 50000 {
		fmt.Fprintf(&lua, "%q,\n", hd.signer.Sign(e.nextUser(), time.Now().Add(time.Hour)))
	}
	lua.WriteString(`}
local i = 0
request = function()
  i = i + 1
  return wrk.format("POST", nil, {["Authorization"] = "Bearer " .. t[(i % #t) + 1]}, nil)
end
`)
	f, err := os.CreateTemp("", "hbbench-*.lua")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(lua.String()); err != nil {
		return err
	}
	f.Close()
	args := []string{"-t2", "-c256", "-d" + o.hotDur.String(), "--latency", "-s", f.Name(), hd.url + "/v1/packets/" + hot.String() + "/open"}
	fmt.Println("e2e: wrk", strings.Join(args, " "))
	out, err := exec.CommandContext(ctx, "wrk", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("wrk: %w\n%s", err, out)
	}
	m := wrkRate.FindSubmatch(out)
	if m == nil {
		return errors.New("wrk: no Requests/sec in its output")
	}
	fmt.Fprintf(w, "\n## wrk (2 threads, 256 connections, %s) on POST /v1/packets/{hot}/open\n\n```\n%s```\nwrk open req/s: %s\n", o.hotDur, out, m[1])
	return nil
}
