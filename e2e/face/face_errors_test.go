package face_test

// The red-packet page's production sign-in (a token the host app hands
// over in the address) and its messages for the refusals a user meets:
// insufficient funds on send, sold out and expired answered by open.

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/browsertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// The exact sentences the page shows for the codes (router/web/static/app.js).
const (
	msgSoldOut           = "手慢了，红包派完了 — Too late: every share of this red packet has been taken."
	msgExpired           = "This red packet has expired; what nobody took went back to the sender."
	msgInsufficientFunds = "Your balance is too low for this red packet. Top up, or send less."
)

// startingBalance is what a token-signed-in user holds: 100 fen, too little
// for the ¥2.00 send checkRefusals makes.
const startingBalance = 100

// expiring is a packet the page is holding open (its 開 shown) until the
// cluster's expiry passes.
type expiring struct {
	tab     *browsertest.Tab
	expires time.Time
}

// checkRefusals signs a fresh user in with a token in the address, as the
// host app does (no dev sign-in); makes a send the balance cannot pay; opens
// a packet whose last share went to someone else after the page's grab; and
// leaves the tab on a packet, ready to open, for checkExpired.
func checkRefusals(t *testing.T, c *clustertest.Cluster, b *browsertest.Browser, expiry time.Duration) expiring {
	t.Helper()
	sender := dbtest.FreshUser()
	u := dbtest.FreshUser()
	// The dev grant is credited once per sender under this ledger key (set's
	// devGrant); taking the key first leaves the user with 100 fen.
	if _, _, err := c.Wallet().Apply(context.Background(), hongbao.Entry{Key: "topup:dev-grant:" + u.String(), User: u,
		Amount: startingBalance, Kind: hongbao.KindTopUp}); err != nil {
		t.Fatal(err)
	}
	tab := b.Tab(t, 390, 844)
	tab.Do(chromedp.Navigate(c.URL() + "/#token=" + c.Token(u)))
	fen := browsertest.Wait[string](tab, `document.querySelector("#balance")?.dataset.fen`)
	who := browsertest.Eval[string](tab, `document.querySelector("#who-name").textContent`)
	if who != "User "+u.String() || fen != strconv.Itoa(startingBalance) {
		t.Errorf("signed in by token: the page shows %q with %s fen; want User %s with %d", who, fen, u, startingBalance)
	}
	if h := browsertest.Eval[string](tab, "location.href"); strings.Contains(h, "token") || browsertest.Eval[bool](tab, `!!document.querySelector("#signin")`) {
		t.Errorf("after a token sign-in the address is %q (the token stays in it), or the sign-in form shows", h)
	}

	tab.Do(chromedp.SendKeys(chromedp.CSS("#send-total"), "2"), chromedp.SetValue(chromedp.CSS("#send-count"), "1"),
		chromedp.Click(chromedp.CSS("#send-go")))
	if msg := browsertest.Wait[string](tab, `(() => { const m = document.querySelector("#send .msg.bad"); return m && !m.hidden && m.textContent; })()`); msg != msgInsufficientFunds {
		t.Errorf("a ¥2.00 send with ¥1.00: the page says %q, want %q", msg, msgInsufficientFunds)
	}

	// Sold out, said by open: the page's grab saw the last share free.
	one := c.Client.Send(sender, hongbao.SendRequest{Total: 100, Count: 1, Type: hongbao.Random, Greeting: "one"}, "")
	if one.Status != 201 {
		t.Fatalf("send: %v", one)
	}
	tab.Do(chromedp.Navigate("about:blank"), chromedp.Navigate(c.URL()+"/#/p/"+one.Body.ID))
	browsertest.Wait[bool](tab, `!!document.querySelector("#open")`)
	if o := c.Client.Open(dbtest.FreshUser(), one.Body.ID); o.Status != 200 {
		t.Fatalf("the other opener: %v", o)
	}
	tab.Do(chromedp.Click(chromedp.CSS("#open")))
	if msg := browsertest.Wait[string](tab, `document.querySelector("#closed")?.textContent`); msg != msgSoldOut {
		t.Errorf("open of a packet sold out since the grab: the page says %q, want %q", msg, msgSoldOut)
	}

	exp := c.Client.Send(sender, hongbao.SendRequest{Total: 300, Count: 3, Type: hongbao.Random, Greeting: "expiring"}, "")
	if exp.Status != 201 {
		t.Fatalf("send: %v", exp)
	}
	tab.Do(chromedp.Navigate("about:blank"), chromedp.Navigate(c.URL()+"/#/p/"+exp.Body.ID))
	browsertest.Wait[bool](tab, `!!document.querySelector("#open")`)
	return expiring{tab: tab, expires: time.Now().Add(expiry)}
}

// checkExpired taps 開 on the held packet once its expiry has passed: open
// answers expired, and the page says so.
func checkExpired(t *testing.T, e expiring) {
	t.Helper()
	time.Sleep(time.Until(e.expires) + 500*time.Millisecond)
	e.tab.Do(chromedp.Click(chromedp.CSS("#open")))
	if msg := browsertest.Wait[string](e.tab, `document.querySelector("#closed")?.textContent`); msg != msgExpired {
		t.Errorf("open past expiry: the page says %q, want %q", msg, msgExpired)
	}
}
