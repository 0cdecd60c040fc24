// Package browsertest starts a real headless Chromium (Debian's chromium,
// which scripts/dev.sh installs) for one test and drives its tabs with
// chromedp: the red-packet page and the operator dashboard are tested the
// way people see them.
//
//	b := browsertest.Start(t)
//	tab := b.Tab(t, 390, 844)
//	tab.Do(chromedp.Navigate(url))
//	id := browsertest.Wait[string](tab, `document.querySelector("#sent")?.dataset.packet`)
//	tab.Screenshot("page.png", dir)
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// Browser is a running headless Chromium with a fresh profile.
type Browser struct {
	ctx context.Context // the browser's (its first tab's) chromedp context
}

// Exec is the Chromium binary: $HB_CHROMIUM, else chromium on the PATH,
// else /usr/bin/chromium.
func Exec() string {
	if p := os.Getenv("HB_CHROMIUM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return "/usr/bin/chromium"
}

// Start starts Chromium for the test; it stops when the test ends. A
// missing Chromium fails the test (scripts/dev.sh test installs it).
func Start(t testing.TB) *Browser {
	t.Helper()
	dbtest.Need(t)
	bin := Exec()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("browsertest: no Chromium at %s (scripts/dev.sh test installs the Debian package chromium): %v", bin, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "chromium-profile")),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("lang", "en-US"),
	}
	base, cancelBase := context.WithTimeout(context.Background(), 4*time.Minute)
	alloc, cancelAlloc := chromedp.NewExecAllocator(base, opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelCtx(); cancelAlloc(); cancelBase() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("browsertest: start %s: %v", bin, err)
	}
	return &Browser{ctx: ctx}
}

// Tab opens a new tab (its own sessionStorage) whose viewport is width x
// height CSS pixels at device scale 2; it closes when the test ends.
func (b *Browser) Tab(t testing.TB, width, height int64) *Tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx)
	t.Cleanup(cancel)
	tab := &Tab{Ctx: ctx, t: t}
	tab.Do(chromedp.EmulateViewport(width, height, chromedp.EmulateScale(2)))
	return tab
}

// Tab is one browser tab.
type Tab struct {
	Ctx context.Context
	t   testing.TB
}

// Do runs steps in the tab, failing the test on an error.
func (tab *Tab) Do(steps ...chromedp.Action[chromedp.Void]) {
	tab.t.Helper()
	if err := chromedp.Do(tab.Ctx, steps...); err != nil {
		tab.t.Fatalf("browser: %v\npage text:\n%s", err, tab.text())
	}
}

// WaitFor is how long Wait polls: a page's answer under make test's
// heaviest phase (load average 30, a new cluster creating its first day
// tables) once took over 20 s; a page that never answers fails all the
// same.
const WaitFor = 45 * time.Second

// Wait polls the JavaScript expression in the tab until it is truthy
// (at most WaitFor) and returns its value; a timeout fails the test with
// the page's text.
func Wait[T any](tab *Tab, expr string) T {
	tab.t.Helper()
	deadline := time.Now().Add(WaitFor)
	for {
		v, err := chromedp.Run(tab.Ctx, chromedp.Poll[T](expr, chromedp.WithPollingTimeout(time.Until(deadline)),
			chromedp.WithPollingInterval(50*time.Millisecond)))
		if err == nil {
			return v
		}
		if !navigating(err) || time.Now().After(deadline) {
			tab.t.Fatalf("browser: waiting for %s: %v\npage text:\n%s", expr, err, tab.text())
		}
		time.Sleep(50 * time.Millisecond) // a page being replaced: ask the new one
	}
}

// navigating reports an error of a poll whose page went away under it
// (a navigation replaced the JavaScript context it ran in).
func navigating(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot find context") || strings.Contains(s, "context was destroyed") ||
		strings.Contains(s, "Inspected target navigated")
}

// Eval evaluates the JavaScript expression once.
func Eval[T any](tab *Tab, expr string) T {
	tab.t.Helper()
	v, err := chromedp.Run(tab.Ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tab.t.Fatalf("browser: %s: %v", expr, err)
	}
	return v
}

func (tab *Tab) text() string {
	ctx, cancel := context.WithTimeout(tab.Ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// Screenshot writes the tab's viewport as a PNG named name into every
// directory of dirs (created when missing).
func (tab *Tab) Screenshot(name string, dirs ...string) {
	tab.t.Helper()
	png, err := chromedp.Run(tab.Ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tab.t.Fatalf("browser: screenshot: %v", err)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tab.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name), png, 0o644); err != nil {
			tab.t.Fatal(err)
		}
	}
}
