package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// docShots are the screenshots that the docs show (docs/api.md), written
// to docs/console when GITFLEET_SCREENSHOTS is set: a change to a page is
// seen there by running the test again.
var docShots = map[string]bool{"overview": true, "repos": true, "repo": true, "status": true, "nodes": true, "catalog": true, "tasks": true}

// TestConsoleInChromium opens the full node's console in headless
// Chromium: the pages render, a search narrows the repositories, and an
// operator enters the token and fetches a repository now, whose task is
// seen done. The overview and a repository's page update themselves when
// a push is fetched, from the event stream, without a reload; a
// repository's public status shows its badge. No page may raise a script
// error or break its Content-Security-Policy.
func TestConsoleInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	exe := chromium(t)
	shots := artifacts(t)
	repos := seq(0, 4)
	f := apiFleet(t, repos, (*fleet).serveCatalog)

	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1200, 820)}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 4*time.Minute)
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
	eval := func(expr string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
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
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err == nil {
			err = os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		}
		if err == nil && docShots[name] && os.Getenv("GITFLEET_SCREENSHOTS") != "" {
			err = os.WriteFile(filepath.Join("..", "docs", "console", name+".png"), png, 0o644)
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
	// stay marks the page, so that a test can tell a page that updated
	// itself from one that was loaded again.
	stay := func() { eval(`window.gitfleetStayed = "yes"; "ok"`) }
	stayed := func() bool { return eval(`window.gitfleetStayed || "no"`) == "yes" }

	// The overview: repositories by state, nodes, freshness, and the
	// fleet's trends, drawn at once.
	do("overview", chromedp.Navigate(f.base+"/"), chromedp.WaitVisible(chromedp.CSS("#repos-by-state")))
	main := text("main")
	for _, want := range []string{"Repositories", "Freshness, last day", "Staleness", "Nodes", "Upstream errors", "Being fetched now", "alive",
		"The fleet, last day", "checks of upstreams", "git served to the public", "disk used"} {
		if !strings.Contains(main, want) {
			t.Errorf("the overview lacks %q:\n%s", want, main)
		}
	}
	if n, dot := count("#fresh-chart svg path:not(.dot)"), count("#fresh-chart svg path.dot"); n != 1 || dot != 1 {
		t.Errorf("the freshness chart draws %d lines and %d dots, want one of each (the share now at least)", n, dot)
	}
	if n := count("#trends figure svg"); n != 5 {
		t.Errorf("%d trend charts, want 5", n)
	}
	// The overview follows the event stream: a push fetched on demand
	// updates it without a reload.
	until("the overview's event stream", `document.querySelector("#live-state").textContent.startsWith("live")`, 30*time.Second)
	stay()
	if _, err := f.up.Commit(f.name(3), "main"); err != nil {
		t.Fatal(err)
	}
	var tk task
	if code := call(t, "POST", f.base+"/api/v1/repos/"+f.key(3)+"/fetch", apiToken, nil, &tk); code != 202 {
		t.Fatalf("fetch %s: %d", f.key(3), code)
	}
	until("the overview updated by the event of the push", `Number(document.body.dataset.event || 0) > 0`, 90*time.Second)
	if !stayed() {
		t.Error("the overview was loaded again rather than updated")
	}
	if !strings.Contains(text("#live-state"), "live, updated") {
		t.Errorf("the live state after an update: %q", text("#live-state"))
	}
	shot("overview")
	do("the week", chromedp.Click(chromedp.CSS("#other-range")), chromedp.WaitVisible(chromedp.CSS("#fresh-chart")))
	if h := text("#freshness h2"); h != "Freshness, last week" {
		t.Errorf("the week's overview: %q", h)
	}

	// The repositories, then a search that narrows them to one.
	do("repositories", chromedp.Navigate(f.base+"/-/repos"), chromedp.WaitVisible(chromedp.CSS("#repo-table")))
	if rows := count("#repo-table tbody tr"); rows < len(repos) {
		t.Errorf("the repositories page lists %d rows, want at least %d", rows, len(repos))
	}
	if c := text("#count"); !strings.Contains(c, "repositories match") {
		t.Errorf("the repositories page's count: %q", c)
	}
	shot("repos")
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

	// A repository's page: its facts with their times in UTC, its refs
	// with their tips' dates, its log.
	do("repository", chromedp.Navigate(f.base+"/-/repos/"+f.key(2)), chromedp.WaitVisible(chromedp.CSS("#fetch-now")))
	if refs := text("#refs"); !strings.Contains(refs, "refs/heads/main") {
		t.Errorf("the repository page shows no refs/heads/main:\n%s", refs)
	}
	if n := count(`#refs time[datetime$="Z"]`); n < 2 {
		t.Errorf("%d refs have their tip's commit date in UTC, want the branches' 2:\n%s", n, text("#refs"))
	}
	for _, sel := range []string{"#verified-at", "#last-attempt", "#last-success"} {
		if n := count(sel + ` time[datetime$="Z"]`); n != 1 {
			t.Errorf("%s has no time in UTC: %q", sel, text(sel))
		}
	}
	if size := text("#size"); !strings.HasSuffix(size, "B") {
		t.Errorf("the size on disk: %q", size)
	}
	if next := text("#next-check"); !strings.Contains(next, "schedule") && !strings.Contains(next, "this full node owns it") {
		t.Errorf("the next check: %q", next)
	}
	if n := count("#log tbody tr[data-id]"); n == 0 {
		t.Errorf("the log is empty:\n%s", text("#log"))
	}
	// The operator enters the token and fetches a push now: the refs and
	// the log update themselves from the event stream.
	do("token", chromedp.SendKeys(chromedp.CSS("#token-input"), apiToken), chromedp.Click(chromedp.CSS("#token-save")),
		chromedp.WaitVisible(chromedp.CSS("#token-forget")))
	if state := text("#token-state"); state != "operator" {
		t.Errorf("after the token: %q", state)
	}
	until("the repository page's event stream", `document.querySelector("#live-state").textContent.startsWith("live")`, 30*time.Second)
	stay()
	pushed, err := f.up.Commit(f.name(2), "main")
	if err != nil {
		t.Fatal(err)
	}
	do("fetch now", chromedp.Click(chromedp.CSS("#fetch-now")))
	until("the fetch's task ends", `["done", "failed"].includes(document.querySelector("#task-state").dataset.state)`, 2*time.Minute)
	if task := text("#task-state"); !strings.HasSuffix(task, ": done") {
		t.Errorf("the fetch's task: %q", task)
	}
	until("the pushed commit in the refs, without a reload", `document.querySelector("#refs").textContent.includes(`+strconv.Quote(pushed[:12])+`)`, 60*time.Second)
	if events := eval(`document.body.dataset.event || "0"`); !stayed() || events == "0" {
		t.Errorf("the repository page was not updated in place by the event (stayed %v, %s updates by an event)", stayed(), events)
	}
	until("the pull's refs in the log", `document.querySelector("#log").textContent.includes(`+strconv.Quote(pushed[:10])+`)`, 30*time.Second)
	// The pull's entry names the ref it moved, from the old tip to the new.
	moved := eval(`[...document.querySelectorAll("#log td.moves")].map(td => td.textContent).find(s => s.includes(` + strconv.Quote(pushed[:10]) + `)) || ""`)
	if !strings.Contains(moved, "refs/heads/main") || !strings.Contains(moved, "→ "+pushed[:10]) {
		t.Errorf("the pull's refs in the log: %q", moved)
	}
	shot("repo")
	if loc := location(); strings.Contains(loc, apiToken) {
		t.Errorf("the token is in a URL: %s", loc)
	}
	// With the token, the script shows the operator the error's text.
	do("failing repository as the operator", chromedp.Navigate(f.base+"/-/repos/"+missing), chromedp.WaitVisible(chromedp.CSS("#last-error")))
	until("the error's details", `document.querySelector("#last-error").textContent !== "not found"`, 30*time.Second)
	t.Logf("the operator sees: %s", text("#last-error"))

	// The public status of a repository, with its badge.
	do("public status", chromedp.Navigate(f.base+"/-/status/"+f.key(2)), chromedp.WaitVisible(chromedp.CSS("#status-word")))
	until("the badge is drawn", `document.querySelector("#badge-img").complete && document.querySelector("#badge-img").naturalWidth > 0`, 30*time.Second)
	if word := text("#status-word"); !slices.Contains([]string{"current", "behind"}, word) {
		t.Errorf("the status of a mirrored repository: %q", word)
	}
	if md := text("#badge-markdown"); !strings.Contains(md, "/-/badge/"+f.key(2)+".svg") {
		t.Errorf("the badge's Markdown: %q", md)
	}
	shot("status")

	// Nodes, the catalog, the tasks.
	do("nodes", chromedp.Navigate(f.base+"/-/nodes"), chromedp.WaitVisible(chromedp.CSS("#node-table")))
	shot("nodes")
	if rows, table := count("#node-table tbody tr"), text("#node-table"); rows != 3 || !strings.Contains(table, "partial-1") || !strings.Contains(table, "Revoke") {
		t.Errorf("the nodes page shows %d rows:\n%s", rows, table)
	}
	if history := text("#node-table"); !strings.Contains(history, "joined") || strings.Contains(history, "unknown") {
		t.Errorf("the nodes' history:\n%s", history)
	}
	do("catalog", chromedp.Navigate(f.base+"/-/catalog"), chromedp.WaitVisible(chromedp.CSS("#catalog-commit")))
	shot("catalog")
	if commit := strings.TrimSpace(text("#catalog-commit")); len(commit) != 40 {
		t.Errorf("the catalog page shows commit %q", commit)
	}
	if u := text("#catalog-url"); u != f.catalogURL {
		t.Errorf("the catalog page says it is fetched from %q, want %q", u, f.catalogURL)
	}
	for _, sel := range []string{"#catalog-last-fetch", "#catalog-next-fetch"} {
		if n := count(sel + ` time[datetime$="Z"]`); n != 1 {
			t.Errorf("%s: %q", sel, text(sel))
		}
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
