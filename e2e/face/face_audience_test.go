package face_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/hongbao-dev/hongbao/e2e/harness/browsertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// msgNotInAudience is the page's sentence for not_in_audience.
const msgNotInAudience = "This red packet is for other people: its sender named who may open it."

// checkAudience: the page sends a packet only for one user, says so on the
// sent card; the user's envelope says it is for them and opens; a stranger
// is told it is for other people before any tap, with no 開 to tap.
func checkAudience(t *testing.T, c *clustertest.Cluster, b *browsertest.Browser) {
	t.Helper()
	sender, member, stranger := dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
	tab := b.Tab(t, 390, 844)
	signIn(tab, c.URL()+"/", sender)
	browsertest.Wait[bool](tab, `!!document.querySelector("#send-total")`)
	tab.Do(chromedp.SetValue(chromedp.CSS("#send-audience"), member.String()))
	id := send(t, tab, "6.66", "1", "only for you")
	if s := browsertest.Eval[string](tab, `document.querySelector("#sent-audience").textContent`); !strings.Contains(s, "Only for user "+member.String()) {
		t.Errorf("sent card says %q, want it only for user %s", s, member)
	}
	link := c.URL() + "/#/p/" + id

	other := b.Tab(t, 390, 844)
	signIn(other, link, stranger)
	if msg := browsertest.Wait[string](other, `document.querySelector("#closed")?.textContent`); msg != msgNotInAudience {
		t.Errorf("a stranger sees %q, want %q", msg, msgNotInAudience)
	}
	if browsertest.Eval[bool](other, `!!document.querySelector("#open")`) {
		t.Error("a stranger is offered 開")
	}

	mine := b.Tab(t, 390, 844)
	if got := openOnPage(mine, link, member, false); got != 666 {
		t.Errorf("the member got %d fen, want 666", got)
	}
	if from := browsertest.Eval[string](mine, `document.querySelector("#env-from").textContent`); !strings.Contains(from, "for you") {
		t.Errorf("the member's envelope says %q, want it for them", from)
	}
	if o := c.Client.Open(stranger, id); o.Status != 403 {
		t.Errorf("the stranger's open through the router: %v, want 403", o)
	}
}
