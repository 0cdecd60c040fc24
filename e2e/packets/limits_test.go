package packets_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestClusterDailySendLimit: a cluster configured with limits.daily_send_count
// 2 (the real processes, through the router) lets a sender send two packets
// a day and answers the third 403 daily_limit, naming the limit and the next
// midnight of the cluster's time zone, with nothing debited for it.
func TestClusterDailySendLimit(t *testing.T) {
	const grant = 1_000_000
	c := clustertest.Start(t, clustertest.Options{Sets: 1, DevGrant: grant,
		ConfigYAML: "limits:\n  daily_send_count: 2\n"})
	sender := dbtest.FreshUser()
	for i, total := range []int64{300, 400} {
		if r := c.Client.Send(sender, hongbao.SendRequest{Total: total, Count: 2, Type: hongbao.Random}, ""); r.Status != http.StatusCreated {
			t.Fatalf("send %d under the limit: %v", i+1, r)
		}
	}
	r := c.Client.Send(sender, hongbao.SendRequest{Total: 500, Count: 2, Type: hongbao.Random}, "")
	if r.Status != http.StatusForbidden || r.Code != "daily_limit" {
		t.Fatalf("the third send of the day: %v, want 403 daily_limit", r)
	}
	var p struct {
		Limit struct {
			Name     string `json:"name"`
			Value    int64  `json:"value"`
			ResetsAt string `json:"resets_at"`
		} `json:"limit"`
	}
	if err := json.Unmarshal(r.Raw, &p); err != nil {
		t.Fatal(err)
	}
	loc, err := time.LoadLocation("Asia/Shanghai") // the cluster's time zone
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().In(loc)
	midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, loc)
	resets, err := time.Parse(time.RFC3339Nano, p.Limit.ResetsAt)
	if p.Limit.Name != "daily_send_count" || p.Limit.Value != 2 || err != nil || !resets.Equal(midnight) {
		t.Errorf("the problem's limit: %+v (%v), want daily_send_count 2 resetting at %s", p.Limit, err, midnight)
	}
	w := c.Client.Wallet(sender)
	if w.Status != http.StatusOK || w.Body.Balance != grant-300-400 {
		t.Errorf("wallet after the refused send: %v, want %d (nothing debited for it)", w, grant-300-400)
	}
	if s := c.Client.Sent(sender, "", 0); s.Status != http.StatusOK || len(s.Body.Items) != 2 {
		t.Errorf("sent history: %v, want the two packets only", s)
	} else if !strings.Contains(string(r.Raw), "daily_send_count") {
		t.Errorf("the problem's detail does not name the limit: %s", r.Raw)
	}
}
