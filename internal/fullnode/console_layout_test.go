package fullnode

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gitfleet/gitfleet/internal/repokey"
	"github.com/gitfleet/gitfleet/internal/series"
)

// At 100,000 repositories the overview's cards keep to their boxes (the
// staleness card overflowed into the nodes card) and the counts have their
// thousands separated: the full node's own console over its benchmark's
// states, in headless Chromium, at a desktop's width and at a narrow one.
// With GITFLEET_SCREENSHOTS set it writes docs/console/overview-100k.png.
func TestConsoleLayoutAtAHundredThousandRepositories(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	exe, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set and no chromium is installed")
		}
		t.Skip("no chromium installed: apt-get install chromium")
	}
	f := benchFullNode(t, 100_000)
	spreadFigures(f, 100_000)
	srv := httptest.NewServer(f.publicHandler())
	defer srv.Close()

	actx, cancel := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1200, 900))
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	// overflowing lists the cards whose content is wider than they are,
	// the pairs of cards that overlap, and the figures that wrap.
	const overflowing = `JSON.stringify((() => {
		const cards = [...document.querySelectorAll(".grid > section")];
		const out = cards.filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.id + " overflows");
		const rects = cards.map(c => c.getBoundingClientRect());
		for (let i = 0; i < cards.length; i++) {
			for (let j = i + 1; j < cards.length; j++) {
				const a = rects[i], b = rects[j];
				if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1) {
					out.push(cards[i].id + " overlaps " + cards[j].id);
				}
			}
		}
		for (const el of document.querySelectorAll(".grid td.num, .grid .big")) {
			const r = document.createRange();
			r.selectNodeContents(el);
			if (r.getClientRects().length > 1) {
				out.push(el.closest("section").id + ": " + el.textContent + " wraps");
			}
		}
		return out;
	})())`
	for _, width := range []int64{1200, 700} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900), chromedp.Navigate(srv.URL+"/"),
			chromedp.WaitVisible(chromedp.CSS("#staleness"))); err != nil {
			t.Fatal(err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](overflowing))
		if err != nil {
			t.Fatal(err)
		}
		var bad []string
		if err := json.Unmarshal([]byte(got), &bad); err != nil {
			t.Fatal(err)
		}
		if len(bad) > 0 {
			t.Errorf("at %d px: %v", width, bad)
		}
		total, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#repos-by-state .big")))
		if err != nil {
			t.Fatal(err)
		}
		if total != "100,000" {
			t.Errorf("at %d px the total reads %q", width, total)
		}
		if width == 1200 && os.Getenv("GITFLEET_SCREENSHOTS") != "" {
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err == nil {
				err = os.WriteFile(filepath.Join("..", "..", "docs", "console", "overview-100k.png"), png, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// spreadFigures gives the bench's n repositories (all verified now) a
// spread of verified_at, and the full node's series a week of figures of
// a fleet of that size: the checks and bytes served of a day and a night,
// a few failures, a disk that grows, and the share current as it is (none:
// the bench holds no mirror on disk). They are a test's, for the layout
// and its screenshot.
func spreadFigures(f *Node, n int) {
	now := f.clk.Now()
	keys := make([]repokey.Key, 0, n)
	for i := range n {
		k := fmt.Sprintf("host%d.example/group%d/repo%d", i%7, i%100, i)
		var age time.Duration
		switch i % 20 {
		case 15, 16:
			age = 30 * time.Minute
		case 17:
			age = 3 * time.Hour
		case 18:
			age = 50 * time.Hour
		case 19:
			age = -1 // never
		}
		switch {
		case age < 0:
			forceVerified(f, k, 0)
		case age > 0:
			forceVerified(f, k, now.Add(-age).UnixMilli())
		}
		keys = append(keys, repokey.Key(k))
	}
	f.reclass(keys...)
	current := f.totals().current
	for m := 7 * 24 * 60; m >= 0; m-- {
		at := now.Add(-time.Duration(m) * time.Minute)
		day := 0.5 + 0.5*math.Sin(2*math.Pi*float64(at.Hour()*60+at.Minute())/(24*60)) // 0 to 1 over a day
		checks := uint64(60 + 40*day + float64(m%7))
		f.series.Count(at, series.Counts{Checks: checks, Fetches: checks / 12, Failures: uint64(m%5) / 3,
			ServedBytes: uint64((2 + 30*day) * float64(1<<20))})
		f.series.Sample(at, series.Gauges{DiskUsed: uint64(900<<30) + uint64(7*24*60-m)*(8<<20), Total: uint64(n),
			Current: uint64(current)})
	}
}
