package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Chromium is the path of Debian's chromium (or another Chromium on PATH);
// the test is skipped where there is none (.ci/run installs it).
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("headless browser test skipped: no chromium on PATH (install it with: apt-get install -y chromium; .ci/run does)")
	return ""
}

// BrowserOptions shape a test's browser.
type BrowserOptions struct {
	Width, Height int           // the window in CSS pixels (0: Chromium's default)
	Timeout       time.Duration // bounds the whole session (0: the test's end only)
}

// Browser is one test's headless Chromium with a profile of its own,
// stopped when the test ends. Its methods fail the test when a step
// fails.
type Browser struct {
	t testing.TB
	// Ctx runs chromedp actions in the browser's tab.
	Ctx context.Context
}

// NewBrowser starts a headless Chromium for t (skipping t where none is
// installed). Start it after the stack it visits, so it stops first.
func NewBrowser(t testing.TB, o BrowserOptions) *Browser {
	t.Helper()
	exe := Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "profile")),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true))
	if o.Width > 0 && o.Height > 0 {
		opts = append(opts, chromedp.WindowSize(o.Width, o.Height))
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	cancelT := context.CancelFunc(func() {})
	if o.Timeout > 0 {
		ctx, cancelT = context.WithTimeout(ctx, o.Timeout)
	}
	t.Cleanup(func() { cancelT(); cancelB(); cancelA() })
	return &Browser{t: t, Ctx: ctx}
}

// Do runs steps; what names them in the failure.
func (b *Browser) Do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.Ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// Text is the trimmed text of the element sel, waiting for it.
func (b *Browser) Text(sel string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(v)
}

// Count is how many elements match sel now.
func (b *Browser) Count(sel string) int {
	b.t.Helper()
	n, err := chromedp.Run(b.Ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
	if err != nil {
		b.t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

// Attr is the attribute name of the element sel now ("" when either is absent).
func (b *Browser) Attr(sel, name string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`(document.querySelector(`+strconv.Quote(sel)+`)||{getAttribute:()=>""}).getAttribute(`+strconv.Quote(name)+`)||""`))
	if err != nil {
		b.t.Fatalf("attribute %s of %s: %v", name, sel, err)
	}
	return v
}

// Submit clicks sel and waits for the page it loads.
func (b *Browser) Submit(what, sel string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.Ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(sel)))); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// Shot saves a full-page screenshot as name.png in $TATKAL_SCREENSHOTS,
// when it is set.
func (b *Browser) Shot(name string) {
	if dir := os.Getenv("TATKAL_SCREENSHOTS"); dir != "" {
		SaveShot(b.Ctx, dir, name)
	}
}

// SaveShot saves a full-page screenshot of the tab of ctx as dir/name.png,
// best effort (a screenshot is evidence, not an assertion).
func SaveShot(ctx context.Context, dir, name string) {
	if buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		os.MkdirAll(dir, 0o755)                                   //nolint:errcheck
		os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644) //nolint:errcheck
	}
}
