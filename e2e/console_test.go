package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromium finds Debian's Chromium. Without it the test skips, unless
// under CI, where .ci/run installs it and its absence is a failure.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("CI is set and no chromium is installed (.ci/run installs Debian's chromium)")
	}
	t.Skip("no chromium installed: apt-get install chromium")
	return ""
}

// artifacts is where the test leaves its screenshots: $GITFLEET_ARTIFACTS
// or a directory of the test's own.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GITFLEET_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	dir = filepath.Join(dir, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// TestConsoleInChromium opens the full node's console in headless
// Chromium: the pages render, a search narrows the repositories, and an
// operator enters the token and fetches a repository now, whose task is
// seen done. No page may raise a script error or break its
// Content-Security-Policy.
func TestConsoleInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	exe := chromium(t)
	shots := artifacts(t)
	repos := seq(0, 4)
	f := apiFleet(t, repos)

	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1200, 820)}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var problems []string
	err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			problems = append(problems, "script error: "+ev.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				problems = append(problems, "console error")
			}
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
		if err != nil {
			t.Fatalf("count %s: %v", sel, err)
		}
		return n
	}
	location := func() string {
		t.Helper()
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err == nil {
			err = os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		}
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
	}
	until := func(what, expr string, timeout time.Duration) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	// The overview: repositories by state, nodes, freshness.
	do("overview", chromedp.Navigate(f.base+"/"), chromedp.WaitVisible(chromedp.CSS("#repos-by-state")))
	shot("overview")
	main := text("main")
	for _, want := range []string{"Repositories", "Freshness, last day", "Staleness", "Nodes", "Upstream errors", "Being fetched now", "alive"} {
		if !strings.Contains(main, want) {
			t.Errorf("the overview lacks %q:\n%s", want, main)
		}
	}

	// The repositories, then a search that narrows them to one.
	do("repositories", chromedp.Navigate(f.base+"/-/repos"), chromedp.WaitVisible(chromedp.CSS("#repo-table")))
	if rows := count("#repo-table tbody tr"); rows < len(repos) {
		t.Errorf("the repositories page lists %d rows, want at least %d", rows, len(repos))
	}
	// The unfiltered table lists project-01 too: wait for the search's own
	// page, whose form says what it searched.
	do("search", chromedp.SendKeys(chromedp.CSS("#q"), "project-01"), chromedp.Submit(chromedp.CSS("#q")),
		chromedp.WaitVisible(chromedp.CSS(`#repo-search[data-q="project-01"]`)))
	shot("repos-search")
	if rows, table := count("#repo-table tbody tr"), text("#repo-table"); rows != 1 || !strings.Contains(table, f.key(1)) {
		t.Errorf("a search for project-01 shows %d rows:\n%s", rows, table)
	}

	// A failing repository shows its error's class to the public.
	missing := strings.TrimSuffix(strings.TrimPrefix(f.up.RepoURL("does/not-exist"), "http://"), ".git")
	do("failing repository", chromedp.Navigate(f.base+"/-/repos/"+missing), chromedp.WaitVisible(chromedp.CSS("#last-error")))
	if got := text("#last-error"); got != "not found" {
		t.Errorf("the public sees the failing repository's error as %q, want its class", got)
	}

	// A repository's page; the operator enters the token and fetches now.
	do("repository", chromedp.Navigate(f.base+"/-/repos/"+f.key(2)), chromedp.WaitVisible(chromedp.CSS("#fetch-now")))
	if refs := text("#refs"); !strings.Contains(refs, "refs/heads/main") {
		t.Errorf("the repository page shows no refs/heads/main:\n%s", refs)
	}
	do("token", chromedp.SendKeys(chromedp.CSS("#token-input"), apiToken), chromedp.Click(chromedp.CSS("#token-save")),
		chromedp.WaitVisible(chromedp.CSS("#token-forget")))
	if state := text("#token-state"); state != "operator" {
		t.Errorf("after the token: %q", state)
	}
	do("fetch now", chromedp.Click(chromedp.CSS("#fetch-now")))
	until("the fetch's task ends", `["done", "failed"].includes(document.querySelector("#task-state").dataset.state)`, 2*time.Minute)
	shot("repo-fetched")
	if task := text("#task-state"); !strings.HasSuffix(task, ": done") {
		t.Errorf("the fetch's task: %q", task)
	}
	if loc := location(); strings.Contains(loc, apiToken) {
		t.Errorf("the token is in a URL: %s", loc)
	}
	// With the token, the script shows the operator the error's text.
	do("failing repository as the operator", chromedp.Navigate(f.base+"/-/repos/"+missing), chromedp.WaitVisible(chromedp.CSS("#last-error")))
	until("the error's details", `document.querySelector("#last-error").textContent !== "not found"`, 30*time.Second)
	t.Logf("the operator sees: %s", text("#last-error"))

	// Nodes, the catalog, the tasks.
	do("nodes", chromedp.Navigate(f.base+"/-/nodes"), chromedp.WaitVisible(chromedp.CSS("#node-table")))
	shot("nodes")
	if rows, table := count("#node-table tbody tr"), text("#node-table"); rows != 3 || !strings.Contains(table, "partial-1") || !strings.Contains(table, "Revoke") {
		t.Errorf("the nodes page shows %d rows:\n%s", rows, table)
	}
	do("catalog", chromedp.Navigate(f.base+"/-/catalog"), chromedp.WaitVisible(chromedp.CSS("#catalog-commit")))
	shot("catalog")
	if commit := strings.TrimSpace(text("#catalog-commit")); len(commit) != 40 {
		t.Errorf("the catalog page shows commit %q", commit)
	}
	// The harness's catalog has a line that is not a URL (line 3 of part-1.list).
	if problems := text("#problems"); !strings.Contains(problems, "lists/part-1.list:3:") {
		t.Errorf("the catalog page does not name the bad entry's file and line:\n%s", problems)
	}
	do("tasks", chromedp.Navigate(f.base+"/-/tasks"))
	until("the task list", `document.querySelector("#tasks-state").textContent !== "Loading…"`, 30*time.Second)
	shot("tasks")

	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("the pages raised: %v", problems)
	}
}
