package face_test

// The faces of issue 17 in a real browser (headless Chromium driven by
// chromedp): the red-packet page served by the router, and the operator
// dashboard on the router's admin listener, over a whole cluster.

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/browsertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "also write the browser tests' screenshots to docs/screenshots")

// devGrant is what the test cluster credits each sender on first send.
const devGrant = 1_000_000

// faceExpiry is the packets' life in TestFaces: long enough for each flow
// to open its packet (under make test's load a page once took longer to
// sign in than its packet lived: at 20 s, and at 60 s with the cluster
// itself 18 s to start), short enough that one held open expires by the
// end (the flows take one to two minutes; the test waits for the rest).
const faceExpiry = 120 * time.Second

// screenshotDirs are where screenshots go: the test's temp dir, and
// docs/screenshots with -update-screenshots.
func screenshotDirs(t *testing.T) []string {
	dirs := []string{t.TempDir()}
	if *updateScreenshots {
		dirs = append(dirs, filepath.Join("..", "..", "docs", "screenshots"))
	}
	t.Logf("screenshots in %v", dirs)
	return dirs
}

// TestFaces: user A sends through the page, B, C and D open it in three
// tabs, the detail adds up to the fen, a late opener sees sold out; then
// the dashboard shows both SETs and opens moving under a load. Beside it, a
// user signed in by token meets insufficient funds, and sold out and
// expired answered by open (checkRefusals, face_errors_test.go).
func TestFaces(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{DevGrant: devGrant, Expiry: faceExpiry})
	b := browsertest.Start(t)
	shots := screenshotDirs(t)
	held := checkRefusals(t, c, b, faceExpiry)

	a := dbtest.FreshUser()
	home := b.Tab(t, 390, 844)
	signIn(home, c.URL()+"/", a)
	browsertest.Wait[bool](home, `!!document.querySelector("#send-total")`)
	checkMoney(t, home)
	checkMessages(t, home)
	id := send(t, home, "8.88", "3", "恭喜发财，大吉大利")
	link := browsertest.Eval[string](home, `document.querySelector("#share-link").value`)
	if want := c.URL() + "/#/p/" + id; link != want {
		t.Errorf("share link %q, want %q", link, want)
	}

	openers := []hongbao.UserID{dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()}
	tabs := make([]*browsertest.Tab, len(openers))
	for i := range openers {
		tabs[i] = b.Tab(t, 390, 844)
	}
	got := make([]int64, len(openers))
	var wg sync.WaitGroup
	for i, u := range openers {
		wg.Go(func() { got[i] = openOnPage(tabs[i], link, u, i == 2) })
	}
	wg.Wait()
	checkBusyRetried(t, tabs[2])
	if t.Failed() {
		t.FailNow()
	}
	checkShares(t, c, a, id, openers, got)
	checkDetail(t, c, tabs[2], link, a, id)
	browsertest.Wait[bool](tabs[2], `!!document.querySelector("#envelope.opened")`)
	tabs[2].Do(chromedp.Sleep(1200 * time.Millisecond)) // the opening's transitions
	tabs[2].Screenshot("page-opened.png", shots...)

	late := b.Tab(t, 390, 844)
	signIn(late, link, dbtest.FreshUser())
	msg := browsertest.Wait[string](late, `document.querySelector("#closed")?.textContent`)
	if !strings.Contains(msg, "Too late: every share of this red packet has been taken") {
		t.Errorf("a late opener sees %q, want the sold-out message", msg)
	}

	checkAudience(t, c, b)
	checkWallet(t, home, 888, shots)
	checkStatement(t, home, 888, 2*devGrant-888)
	testRain(t, c, late, a, shots)

	t.Run("dashboard", func(t *testing.T) { testDashboard(t, c, b, shots) })
	checkExpired(t, held)
}

// checkMoney runs the page's own yuan <-> fen conversions: strings in,
// integers out, nothing rounded.
func checkMoney(t *testing.T, tab *browsertest.Tab) {
	t.Helper()
	parse := map[string]any{"8.88": 888.0, "10": 1000.0, "0.01": 1.0, "0.1": 10.0, "1.": 100.0, "007.5": 750.0,
		"99999999.99": 9999999999.0, "0.29": 29.0, "1.234": nil, "-1": nil, "abc": nil, "1e3": nil, "": nil, "1,5": nil}
	for in, want := range parse {
		got := browsertest.Eval[any](tab, fmt.Sprintf("window.hongbao.parseYuan(%q)", in))
		if got != want {
			t.Errorf("parseYuan(%q) = %v, want %v", in, got, want)
		}
	}
	show := map[int64]string{0: "0.00", 5: "0.05", 29: "0.29", 123456789: "1,234,567.89", -888: "-8.88", 100: "1.00"}
	for fen, want := range show {
		if got := browsertest.Eval[string](tab, fmt.Sprintf("window.hongbao.yuan(%d)", fen)); got != want {
			t.Errorf("yuan(%d) = %q, want %q", fen, got, want)
		}
	}
}

// checkMessages: every problem code the API documents, and those the
// router's neighbours add, has a sentence of its own on the page.
func checkMessages(t *testing.T, tab *browsertest.Tab) {
	t.Helper()
	spec, err := os.ReadFile(filepath.Join("..", "..", "api", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]bool{"fixed_not_divisible": true, "rate_limited": true, "invalid_user": true, "already_opened": true}
	for _, list := range regexp.MustCompile(`"x-problem-codes": \[([^\]]*)\]`).FindAllStringSubmatch(string(spec), -1) {
		for _, c := range regexp.MustCompile(`"([a-z_]+)"`).FindAllStringSubmatch(list[1], -1) {
			codes[c[1]] = true
		}
	}
	if len(codes) < 25 {
		t.Fatalf("only %d problem codes found in openapi.json", len(codes))
	}
	for code := range codes {
		msg := browsertest.Eval[string](tab, fmt.Sprintf("window.hongbao.human({code: %q, body: {}, retryAfter: 2})", code))
		if strings.HasPrefix(msg, "Something went wrong (") || msg == "" {
			t.Errorf("code %s has no message of its own: %q", code, msg)
		}
	}
	if msg := browsertest.Eval[string](tab, `window.hongbao.human({code: "busy", body: {}, retryAfter: 3})`); !strings.Contains(msg, "3 s") {
		t.Errorf("busy does not say when it retries (Retry-After 3): %q", msg)
	}
}

// signIn opens url in tab and signs in as user through the dev sign-in.
func signIn(tab *browsertest.Tab, url string, user hongbao.UserID) {
	tab.Do(chromedp.Navigate(url))
	browsertest.Wait[bool](tab, `!!document.querySelector("#signin-user")`)
	tab.Do(chromedp.SendKeys(chromedp.CSS("#signin-user"), user.String()), chromedp.Click(chromedp.CSS("#signin-go")))
	browsertest.Wait[bool](tab, `!document.querySelector("#signin")`)
}

// send fills the send form with yuan, shares and a greeting, and returns
// the packet's ID.
func send(t *testing.T, tab *browsertest.Tab, total, count, greeting string) string {
	t.Helper()
	tab.Do(chromedp.SendKeys(chromedp.CSS("#send-total"), total),
		chromedp.SetValue(chromedp.CSS("#send-count"), count),
		chromedp.SetValue(chromedp.CSS("#send-greeting"), greeting))
	if shown := browsertest.Eval[string](tab, `document.querySelector("#send-shown").textContent`); shown != "¥"+total {
		t.Errorf("the form shows %q for %s yuan", shown, total)
	}
	tab.Do(chromedp.Click(chromedp.CSS("#send-go")))
	return browsertest.Wait[string](tab, `document.querySelector("#sent")?.dataset.packet`)
}

// openOnPage signs in as user on the packet's link, taps 開 and returns
// the amount in fen the page shows. With busyFirst the page's first open
// is answered 503 busy with Retry-After: 2 (in the page's fetch), as a
// full queue answers.
func openOnPage(tab *browsertest.Tab, link string, user hongbao.UserID, busyFirst bool) int64 {
	signIn(tab, link, user)
	browsertest.Wait[bool](tab, `!!document.querySelector("#open")`)
	if busyFirst {
		browsertest.Eval[bool](tab, `(() => {
			const real = window.fetch;
			window.opens = [];
			window.fetch = (url, init) => {
				if (!String(url).endsWith("/open")) return real(url, init);
				window.opens.push(Date.now());
				if (window.opens.length > 1) return real(url, init);
				return Promise.resolve(new Response(JSON.stringify({type: "about:blank", title: "Service Unavailable", status: 503,
					code: "busy", detail: "queue full"}), {status: 503, headers: {"Content-Type": "application/problem+json", "Retry-After": "2"}}));
			};
			return true;
		})()`)
	}
	tab.Do(chromedp.Click(chromedp.CSS("#open")))
	fen := browsertest.Wait[string](tab, `document.querySelector("#got")?.dataset.fen`)
	n, _ := strconv.ParseInt(fen, 10, 64)
	return n
}

// checkBusyRetried: the page told the user it was busy and opened again
// by itself after the Retry-After seconds (2, not its default 1).
func checkBusyRetried(t *testing.T, tab *browsertest.Tab) {
	t.Helper()
	opens := browsertest.Eval[[]float64](tab, "window.opens")
	if len(opens) != 2 || opens[1]-opens[0] < 2000 {
		t.Errorf("opens after a busy answer at %v (ms): want two, the second at least 2 s (Retry-After: 2) after the first", opens)
	}
}

// checkShares compares what each page showed with the API's detail.
func checkShares(t *testing.T, c *clustertest.Cluster, sender hongbao.UserID, id string, openers []hongbao.UserID, got []int64) {
	t.Helper()
	d := c.Client.Detail(sender, id)
	if d.Status != 200 {
		t.Fatalf("detail: %v", d)
	}
	byUser := map[string]int64{}
	for _, r := range d.Body.Records {
		byUser[r.User] = r.Amount
	}
	for i, u := range openers {
		if got[i] <= 0 || got[i] != byUser[u.String()] {
			t.Errorf("user %s: the page showed %d fen, the API says %d", u, got[i], byUser[u.String()])
		}
	}
	if d.Body.RemainingCount != 0 || d.Body.RemainingAmount != 0 || len(d.Body.Records) != 3 {
		t.Errorf("after three opens: %d records, %d shares and %d fen left", len(d.Body.Records), d.Body.RemainingCount, d.Body.RemainingAmount)
	}
}

// checkDetail reloads the packet in tab: its detail lists the three shares
// in opening order, summing exactly to the total the API gives, with the
// best-luck mark on the API's best.
func checkDetail(t *testing.T, c *clustertest.Cluster, tab *browsertest.Tab, link string, sender hongbao.UserID, id string) {
	t.Helper()
	tab.Do(chromedp.Navigate("about:blank"), chromedp.Navigate(link))
	rows := browsertest.Wait[[]map[string]string](tab, `(() => {
		const r = [...document.querySelectorAll("#records li.record")];
		return r.length === 3 && r.map((li) => ({user: li.dataset.user, fen: li.querySelector(".money").dataset.fen,
			best: li.querySelector(".best") ? "yes" : ""}));
	})()`)
	d := c.Client.Detail(sender, id).Body
	var sum int64
	for i, r := range rows {
		fen, _ := strconv.ParseInt(r["fen"], 10, 64)
		sum += fen
		if r["user"] != d.Records[i].User || fen != d.Records[i].Amount {
			t.Errorf("detail row %d: user %s %d fen, the API says user %s %d fen", i, r["user"], fen, d.Records[i].User, d.Records[i].Amount)
		}
		if (r["best"] == "yes") != (r["user"] == d.Best) {
			t.Errorf("detail row %d (user %s): best-luck mark %q, the API's best is %s", i, r["user"], r["best"], d.Best)
		}
	}
	if sum != d.Total || d.Total != 888 {
		t.Errorf("the detail's shares add up to %d fen; the API's total is %d (sent: 888)", sum, d.Total)
	}
}

// checkWallet reloads the sender's home: the wallet shows the dev grant
// less what was sent, the sent history the packet; a dev top-up adds the
// grant again.
func checkWallet(t *testing.T, tab *browsertest.Tab, sent int64, shots []string) {
	t.Helper()
	tab.Do(chromedp.Navigate("about:blank"), chromedp.Navigate(strings.Split(browsertest.Eval[string](tab, "location.href"), "#")[0]+"#/"))
	fen := browsertest.Wait[string](tab, `document.querySelector("#balance")?.dataset.fen`)
	if want := strconv.FormatInt(devGrant-sent, 10); fen != want {
		t.Errorf("wallet shows %s fen, want %s (dev grant less the packet)", fen, want)
	}
	tab.Do(chromedp.Click(chromedp.CSS(`.tabs button[data-kind="sent"]`)))
	if h := browsertest.Wait[string](tab, `document.querySelector("#history .money")?.dataset.fen`); h != strconv.FormatInt(sent, 10) {
		t.Errorf("sent history shows %s fen, want %d", h, sent)
	}
	tab.Screenshot("page-home.png", shots...)
	tab.Do(chromedp.Click(chromedp.CSS("#topup")))
	want := strconv.FormatInt(2*devGrant-sent, 10)
	if fen := browsertest.Wait[string](tab, `(() => { const b = document.querySelector("#balance"); return b.dataset.fen === "`+want+`" && b.dataset.fen; })()`); fen != want {
		t.Errorf("after a top-up the wallet shows %s fen, want %s", fen, want)
	}
}

// checkStatement: the "This month" tab shows the user's statement of the
// month: a fresh user's opening balance 0, the packet sent as one debit of
// exactly sent, a closing balance of exactly balance (the wallet's now),
// and the closing balance is the opening plus every row the page shows.
func checkStatement(t *testing.T, tab *browsertest.Tab, sent, balance int64) {
	t.Helper()
	tab.Do(chromedp.Click(chromedp.CSS(`.tabs button[data-kind="statement"]`)))
	closing := browsertest.Wait[string](tab, `document.querySelector("#st-closing .money")?.dataset.fen`)
	fen := func(id string) int64 {
		v, err := strconv.ParseInt(browsertest.Eval[string](tab, `document.querySelector("#`+id+` .money")?.dataset.fen || "x"`), 10, 64)
		if err != nil {
			t.Fatalf("statement row #%s: %v", id, err)
		}
		return v
	}
	if got := fen("st-opening"); got != 0 {
		t.Errorf("a fresh user's opening balance shows %d fen, want 0", got)
	}
	if got, n := fen("st-send"), browsertest.Eval[string](tab, `document.querySelector("#st-send").textContent`); got != -sent || !strings.Contains(n, "×1") {
		t.Errorf("the statement's sends: %d fen (%q), want -%d in one entry", got, n, sent)
	}
	if closing != strconv.FormatInt(balance, 10) {
		t.Errorf("the statement's closing balance is %s fen, want the wallet's %d", closing, balance)
	}
	sum := browsertest.Eval[float64](tab, `[...document.querySelectorAll("#history li:not(#st-opening):not(#st-closing) .money")].reduce((s, m) => s + Number(m.dataset.fen), 0)`)
	if int64(sum) != balance-fen("st-opening") {
		t.Errorf("the rows sum to %v fen, want closing less opening: %d", sum, balance-fen("st-opening"))
	}
}

// testRain sends an activity packet through the API and rains it on the
// page of a signed-in tab: a tap on a falling packet opens it, and the
// page shows what the API says the user got.
func testRain(t *testing.T, c *clustertest.Cluster, tab *browsertest.Tab, sender hongbao.UserID, shots []string) {
	t.Helper()
	p := c.Client.Send(sender, hongbao.SendRequest{Total: 5000, Count: 50, Type: hongbao.Random, Greeting: "红包雨"}, "face-rain")
	if p.Status != 201 {
		t.Fatalf("rain packet: %v", p)
	}
	user := browsertest.Eval[string](tab, `sessionStorage.getItem("hb.user")`)
	base := strings.Split(browsertest.Eval[string](tab, "location.href"), "#")[0]
	tab.Do(chromedp.Navigate(base + "#/p/" + p.Body.ID)) // the envelope, unopened
	browsertest.Wait[bool](tab, `!!document.querySelector("#open")`)
	tab.Screenshot("page-envelope.png", shots...)
	tab.Do(chromedp.Navigate("about:blank"), chromedp.Navigate(base+"#/rain/"+p.Body.ID))
	browsertest.Wait[bool](tab, `!!document.querySelector(".drop")`)
	tab.Do(chromedp.Sleep(1500 * time.Millisecond)) // let a few fall
	// A tap: the pointerdown a finger makes on the first falling packet.
	browsertest.Eval[bool](tab, `document.querySelector(".drop").dispatchEvent(new PointerEvent("pointerdown",
		{bubbles: true, cancelable: true, clientX: 180, clientY: 300}))`)
	fen := browsertest.Wait[string](tab, `(() => { const f = document.querySelector("#rain-got").dataset.fen; return f !== "0" && f; })()`)
	tab.Screenshot("page-rain.png", shots...)
	d := c.Client.Detail(sender, p.Body.ID).Body
	if len(d.Records) != 1 || d.Records[0].User != user || strconv.FormatInt(d.Records[0].Amount, 10) != fen {
		t.Errorf("rain: the page shows %s fen for user %s; the API's records: %+v", fen, user, d.Records)
	}
}

// sendOnSet sends a packet into a bucket SET set owns.
func sendOnSet(t *testing.T, c *clustertest.Cluster, set string) {
	t.Helper()
	sender := dbtest.FreshUser()
	c.TopUp(t, sender, 1000)
	for i := 0; ; i++ {
		key := "on-" + set + "-" + strconv.Itoa(i)
		var owner string
		b := hongbao.BucketFor(sender, []byte(key))
		if err := c.Meta().QueryRow("SELECT set_name FROM hb_meta.buckets WHERE bucket = ?", int(b)).Scan(&owner); err != nil {
			t.Fatal(err)
		}
		if owner != set {
			continue
		}
		if r := c.Client.Retrying(10*time.Second).Send(sender, hongbao.SendRequest{Total: 100, Count: 1, Type: hongbao.Random}, key); r.Status != http.StatusCreated {
			t.Fatalf("send into SET %s: %v", set, r)
		}
		return
	}
}

// testDashboard runs a load of opens and watches the dashboard: both SETs,
// the bucket map, a last verify, a money audit run from the page, a running rebalance's progress, and an
// opens/s that moves.
func testDashboard(t *testing.T, c *clustertest.Cluster, b *browsertest.Browser, shots []string) {
	verifyOut, verifyErr := c.Ctl("verify", "--textfile", c.VerifyTextfile)
	// A packet on each SET today, whichever SETs the page's packets landed
	// on, then an archive run: nothing to archive yet, its summary per SET
	// with a live day.
	for _, s := range c.Sets {
		sendOnSet(t, c, s.Name)
	}
	c.MustCtl(t, "archive", "run")
	stop := make(chan struct{})
	var opens atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { load(t, c, stop, &opens) })
	t.Cleanup(func() { close(stop); wg.Wait() })

	failure := journalRebalance(t, c)
	var admin string
	for _, p := range c.Processes() {
		if p.Kind == clustertest.Router {
			admin = p.Admin
		}
	}
	tab := b.Tab(t, 1280, 1200)
	tab.Do(chromedp.Navigate("http://" + admin + "/dashboard"))
	sets := browsertest.Wait[[]string](tab, `(() => { const s = [...document.querySelectorAll(".set")].map((e) => e.dataset.set);
		return s.length === 2 && document.querySelectorAll("#map i").length === 1000 && s; })()`)
	if strings.Join(sets, ",") != "a,b" {
		t.Errorf("dashboard shows SETs %v, want a and b", sets)
	}
	ready := browsertest.Wait[int](tab, `document.querySelectorAll(".set .pill.ok").length`)
	if ready < 2*2+2 {
		t.Errorf("%d ready/healthy marks, want at least 6 (4 servers healthy and ready)", ready)
	}
	wantVerify := "OK"
	if verifyErr != nil {
		wantVerify = "FAILING"
	}
	if v := browsertest.Wait[string](tab, `document.querySelector("#verify .pill")?.textContent`); v != wantVerify {
		t.Errorf("dashboard's last verify %q, hbctl verify said %q:\n%s", v, wantVerify, verifyOut)
	}
	// The money audit, run in the router's process on a click, under the
	// load: it passes, and says so.
	tab.Do(chromedp.Click(chromedp.CSS("#audit-run")))
	if v := browsertest.Wait[string](tab, `(() => { const p = document.querySelector("#audit .pill"); return p && p.textContent; })()`); v != "OK" {
		t.Errorf("dashboard's money audit %q, want OK; violations: %s", v, browsertest.Eval[string](tab, `document.querySelector("#audit-bad").textContent`))
	}
	checkRebalance(t, tab, failure)
	if rows := browsertest.Wait[int](tab, `document.querySelectorAll("#archive tbody tr").length`); rows != 2 {
		t.Errorf("the archive table has %d rows, want one per SET", rows)
	}
	// Per day: today's tables of each SET are live (not yet past retention).
	if n := browsertest.Eval[int](tab, `[...document.querySelectorAll("#archive tbody tr")].filter((r) =>
		[...r.querySelectorAll(".day.live")].some((d) => /^\d{4}-\d\d-\d\d: live · [1-9]\d*$/.test(d.textContent))).length`); n != 2 {
		t.Errorf("%d SETs list a live day in the archive table, want 2", n)
	}
	// The opens/s of two polls, both non-zero, and different.
	first := browsertest.Wait[string](tab, `(() => { const v = document.querySelector("#opens").textContent; return Number(v) > 0 && v; })()`)
	tab.Screenshot("dashboard.png", shots...)
	second := browsertest.Wait[string](tab, fmt.Sprintf(`(() => { const v = document.querySelector("#opens").textContent;
		return Number(v) > 0 && v !== %q && v; })()`, first))
	t.Logf("dashboard: opens/s %s then %s (the load made %d opens)", first, second, opens.Load())
}

// load opens packets of 100 shares with 16 clients until stop closes:
// every open, the sold-out ones after the last share too, is an open the
// servers count.
func load(t *testing.T, c *clustertest.Cluster, stop <-chan struct{}, opens *atomic.Int64) {
	for round := 0; ; round++ {
		select {
		case <-stop:
			return
		default:
		}
		sender := dbtest.FreshUser()
		p := c.Client.Send(sender, hongbao.SendRequest{Total: 10000, Count: 100, Type: hongbao.Random, Greeting: "load"},
			fmt.Sprintf("face-load-%d-%d", sender, round))
		if p.Status != 201 {
			t.Errorf("load: send: %v", p)
			return
		}
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 10 {
					c.Client.Open(dbtest.FreshUser(), p.Body.ID)
					opens.Add(1)
				}
			})
		}
		wg.Wait()
	}
}
