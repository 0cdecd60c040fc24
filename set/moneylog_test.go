package set_test

import (
	"strconv"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/configs"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestMoneyLinesNameEveryShare: the server's money lines ("shares opened",
// one per committed batch of a packet) name every share the database
// holds, once, with its amount; each line's count and amount are its
// shares'.
func TestMoneyLinesNameEveryShare(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h := newHarness(t, harnessOpts{Log: zap.New(core)})
	const count, clients = 40, 120
	const total = 12345
	id := h.mustSend(t, dbtest.FreshUser(), total, count, "random")
	h.openAtOnce(id, distinctUsers(clients))
	p := dbtest.CheckPacket(t, h.db, id)
	if len(p.Shares) != count {
		t.Fatalf("%d shares in the database, want %d", len(p.Shares), count)
	}

	logged := map[hongbao.UserID]int64{}
	lines, sum := 0, int64(0)
	for _, e := range logs.FilterLoggerName(configs.MoneyLogger).FilterMessage("shares opened").All() {
		f := e.ContextMap()
		if f["packet_id"] != id.String() {
			t.Errorf("line for packet %v, want %s", f["packet_id"], id)
			continue
		}
		lines++
		shares, _ := f["shares"].([]any)
		var lineSum int64
		for _, s := range shares {
			m, _ := s.(map[string]any)
			u, err := strconv.ParseInt(m["user"].(string), 10, 64)
			if err != nil {
				t.Fatalf("share %v: user: %v", m, err)
			}
			a := m["amount"].(int64)
			if _, dup := logged[hongbao.UserID(u)]; dup {
				t.Errorf("user %d logged twice", u)
			}
			logged[hongbao.UserID(u)] = a
			lineSum += a
		}
		if f["count"] != int64(len(shares)) || f["amount"] != lineSum {
			t.Errorf("line count %v amount %v; its shares: %d, %d fen", f["count"], f["amount"], len(shares), lineSum)
		}
		sum += lineSum
	}
	if len(logged) != count || sum != total {
		t.Errorf("money lines name %d shares of %d fen in %d lines; want %d shares of %d", len(logged), sum, lines, count, total)
	}
	for u, a := range p.Shares {
		if logged[u] != a {
			t.Errorf("user %d: share of %d fen, logged %d", u, a, logged[u])
		}
	}
	if lines > count {
		t.Errorf("%d lines for %d shares", lines, count)
	}
}
