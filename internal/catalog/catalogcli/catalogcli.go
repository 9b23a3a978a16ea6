// Package catalogcli implements `gitfleet catalog`, the tools for the people
// who maintain a catalog repository: check (a linter that can run in their
// CI), diff (what a change between two commits does) and gen (a synthetic
// catalog for benchmarks and tests).
//
// It only reads the repositories it is given (gen writes a new one), keeps
// no state, and leaves every catalog rule to package catalog.
package catalogcli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gitfleet/gitfleet/internal/catalog"
	"github.com/gitfleet/gitfleet/internal/config"
	"github.com/gitfleet/gitfleet/internal/egress"
	"github.com/gitfleet/gitfleet/internal/gitcmd"
	"github.com/gitfleet/gitfleet/internal/repokey"
)

// Exit codes of Main.
const (
	exitOK       = 0
	exitProblems = 1 // check found errors
	exitUsage    = 2 // bad arguments, or the repository could not be read
)

const usage = `usage:
  gitfleet catalog check PATH [REV] [--json] [--allow-private-upstreams] [--case-insensitive-host H]
                        [--egress-schemes https,http]
      every problem of the catalog at REV (default HEAD) with file:line, and a
      summary; exits 1 when there are errors. An upstream whose scheme the
      fleet's --egress-schemes refuses (default https,http) is an error: the
      fleet would never fetch it
      Lister lines (https://github.com/ORG/*) are shown as listers; with
      --expand-listers [--forge HOST=KIND,api=URL] [--forge-token HOST=TOKEN]
      each is listed through its forge's API (tokens also from
      GITFLEET_FORGE_TOKENS) and its repositories count as entries
  gitfleet catalog diff PATH OLD NEW [--json] [--full] [--allow-private-upstreams] [--case-insensitive-host H]
                       [--expand-listers [--forge ...] [--forge-token ...]]
      the keys added, removed and changed between two commits, reading only
      the files that differ; --full reads both catalogs whole, to also see
      keys that a file the change did not touch lists again; lister lines
      added and removed are shown, and --expand-listers lists them (both
      catalogs whole) to show the keys their change adds and removes
  gitfleet catalog gen --repos N [--per-file M] DIR
      writes a synthetic catalog repository of N entries in .list files of M
      lines (default 1000) into DIR
`

// Main runs `gitfleet catalog` with args (what follows "catalog") and
// returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	git := gitcmd.New(gitcmd.LocalOnly(), gitcmd.Options{}) // catalogs on this machine, by path
	var run func(context.Context, *gitcmd.Runner, []string, io.Writer) (int, error)
	switch args[0] {
	case "check":
		run = check
	case "diff":
		run = diff
	case "gen":
		run = gen
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "gitfleet catalog: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
	code, err := run(ctx, git, args[1:], stdout)
	var bad usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return exitOK
	case errors.As(err, &bad):
		fmt.Fprintf(stderr, "gitfleet catalog %s: %v\n%s", args[0], err, usage)
		return exitUsage
	case err != nil:
		fmt.Fprintf(stderr, "gitfleet catalog %s: %v\n", args[0], err)
		return exitUsage
	}
	return code
}

// usageError is a mistake in the arguments: the usage is shown with it.
type usageError struct{ error }

// parseArgs parses flags that may come before, between or after the
// positional arguments, and checks the number of positional arguments.
func parseArgs(fs *flag.FlagSet, args []string, minPos, maxPos int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			return nil, err
		} else if err != nil {
			return nil, usageError{err}
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	switch {
	case minPos == maxPos && len(pos) != minPos:
		return nil, usageError{fmt.Errorf("want %d arguments, got %d: %q", minPos, len(pos), pos)}
	case len(pos) < minPos || len(pos) > maxPos:
		return nil, usageError{fmt.Errorf("want %d to %d arguments, got %d: %q", minPos, maxPos, len(pos), pos)}
	}
	return pos, nil
}

// newFlags makes a silent flag set: Main reports its errors.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("gitfleet catalog "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// gitDir finds the git directory of path (a work tree or a bare repository).
func gitDir(ctx context.Context, git *gitcmd.Runner, path string) (string, error) {
	// git cannot even start in a directory that is not there, and says so
	// as if git itself were missing.
	if fi, err := os.Stat(path); err != nil {
		return "", err
	} else if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", path)
	}
	out, err := git.Output(ctx, gitcmd.Cmd{Dir: path, Name: "rev-parse", Flags: []string{"--absolute-git-dir"}})
	if err != nil {
		return "", fmt.Errorf("%s is not a git repository: %w", path, err)
	}
	return strings.TrimSpace(string(out)), nil
}

type checkReport struct {
	Commit   string            `json:"commit"`
	Entries  int               `json:"entries"`
	Listers  int               `json:"listers"`
	Errors   int               `json:"errors"`
	Warnings int               `json:"warnings"`
	Problems []catalog.Problem `json:"problems"`
}

func check(ctx context.Context, git *gitcmd.Runner, args []string, stdout io.Writer) (int, error) {
	fs := newFlags("check")
	asJSON := fs.Bool("json", false, "write the report as JSON")
	private := fs.Bool("allow-private-upstreams", false, "accept upstreams on private and loopback addresses")
	var folded stringList
	fs.Var(&folded, "case-insensitive-host", "a host whose repository paths are case-insensitive (repeatable; github.com and gitee.com always are)")
	schemes := fs.String("egress-schemes", strings.Join(config.Default().EgressSchemes, ","), "the URL schemes the fleet may fetch (its --egress-schemes)")
	var lf listerFlags
	lf.register(fs)
	pos, err := parseArgs(fs, args, 1, 2)
	if err != nil {
		return 0, err
	}
	rev := "HEAD"
	if len(pos) == 2 {
		rev = pos[1]
	}
	dir, err := gitDir(ctx, git, pos[0])
	if err != nil {
		return 0, err
	}
	fold, err := repokey.NewFolding(folded)
	if err != nil {
		return 0, fmt.Errorf("--case-insensitive-host: %w", err)
	}
	policy, err := egress.New(egress.Config{Schemes: strings.Split(*schemes, ",")})
	if err != nil {
		return 0, usageError{fmt.Errorf("--egress-schemes: %w", err)}
	}
	forges, err := lf.config()
	if err != nil {
		return 0, err
	}
	c, err := catalog.Load(ctx, git, dir, rev, catalog.Options{AllowPrivate: *private, Fold: fold})
	if err != nil {
		return 0, err
	}
	listers := c.Listers()
	problems := listerProblems(listers, forges)
	progress := stdout
	if *asJSON {
		progress = io.Discard
	}
	if lf.expand {
		listings, failed := expand(ctx, listers, forges, progress)
		c, _ = c.WithListings(listings)
		problems = append(problems, failed...)
	}
	r := checkReport{Commit: c.Commit(), Entries: c.Len(), Listers: len(listers),
		Problems: slices.Concat(c.Problems(), refusedSchemes(c, policy), problems)}
	slices.SortStableFunc(r.Problems, func(a, b catalog.Problem) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
	for _, p := range r.Problems {
		if p.Severity == catalog.SeverityError {
			r.Errors++
		} else {
			r.Warnings++
		}
	}
	code := exitOK
	if r.Errors > 0 {
		code = exitProblems
	}
	if *asJSON {
		if r.Problems == nil {
			r.Problems = []catalog.Problem{}
		}
		return code, writeJSON(stdout, r)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(stdout, "%s:%d: %s: %s\n", p.File, p.Line, p.Severity, p.Reason)
	}
	if !lf.expand {
		for _, l := range listers {
			fmt.Fprintf(stdout, "%s:%d: lister %s (not expanded: --expand-listers lists it)\n", l.File, l.Line, l.Pattern)
		}
	}
	listed := ""
	if r.Listers > 0 {
		listed = ", " + plural(r.Listers, "lister", "listers")
	}
	fmt.Fprintf(stdout, "%s at %.12s: %s%s, %s, %s\n", pos[0], r.Commit, plural(r.Entries, "entry", "entries"),
		listed, plural(r.Errors, "error", "errors"), plural(r.Warnings, "warning", "warnings"))
	return code, nil
}

// refusedSchemes are the problems of the entries whose upstreams the
// fleet's egress policy refuses by scheme: the catalog accepts git:// and
// ssh:// URLs, but a fleet fetches them only when its operator allows them.
func refusedSchemes(c *catalog.Catalog, policy *egress.Policy) []catalog.Problem {
	allowed := strings.Split(policy.Schemes(), ":")
	var out []catalog.Problem
	c.Range(func(e catalog.Entry) bool {
		for _, u := range append([]string{e.URL}, e.Fallbacks...) {
			scheme, _, ok := strings.Cut(u, "://")
			if ok && !slices.Contains(allowed, scheme) {
				out = append(out, catalog.Problem{File: e.File, Line: e.Line, Key: e.Key.String(), Severity: catalog.SeverityError,
					Reason: fmt.Sprintf("%s: scheme %q is refused by the fleet's egress policy (--egress-schemes %s): it would never be fetched",
						repokey.Redact(u), scheme, strings.Join(allowed, ","))})
			}
		}
		return true
	})
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

type diffReport struct {
	Old     string   `json:"old"`
	New     string   `json:"new"`
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	Changed []string `json:"changed"`
	// ListersAdded and ListersRemoved are the lister lines the change
	// adds and removes (one whose filters changed is in both).
	ListersAdded   []string `json:"listers_added"`
	ListersRemoved []string `json:"listers_removed"`
}

// patterns lists the patterns of ls (never nil, for JSON).
func patterns(ls []catalog.Lister) []string {
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.Pattern)
	}
	return out
}

func diff(ctx context.Context, git *gitcmd.Runner, args []string, stdout io.Writer) (int, error) {
	fs := newFlags("diff")
	asJSON := fs.Bool("json", false, "write the report as JSON")
	private := fs.Bool("allow-private-upstreams", false, "accept upstreams on private and loopback addresses")
	var folded stringList
	fs.Var(&folded, "case-insensitive-host", "a host whose repository paths are case-insensitive (repeatable; github.com and gitee.com always are)")
	full := fs.Bool("full", false, "read both catalogs whole")
	var lf listerFlags
	lf.register(fs)
	pos, err := parseArgs(fs, args, 3, 3)
	if err != nil {
		return 0, err
	}
	dir, err := gitDir(ctx, git, pos[0])
	if err != nil {
		return 0, err
	}
	fold, err := repokey.NewFolding(folded)
	if err != nil {
		return 0, fmt.Errorf("--case-insensitive-host: %w", err)
	}
	opt := catalog.Options{AllowPrivate: *private, Fold: fold}
	var oldID, newID string
	var d catalog.Delta
	if lf.expand {
		// Both sides whole, each with its listers' repositories as the
		// forges list them now: the change is what the lister lines and
		// their filters make of the same listings.
		forges, err := lf.config()
		if err != nil {
			return 0, err
		}
		old, err := catalog.Load(ctx, git, dir, pos[1], opt)
		if err != nil {
			return 0, err
		}
		next, delta, err := old.Update(ctx, git, dir, pos[2])
		if err != nil {
			return 0, err
		}
		listers := append(old.Listers(), next.Listers()...)
		progress := stdout
		if *asJSON {
			progress = io.Discard
		}
		listings, failed := expand(ctx, listers, forges, progress)
		if failed = append(failed, listerProblems(listers, forges)...); len(failed) > 0 {
			for _, p := range failed {
				fmt.Fprintf(stdout, "%s:%d: %s: %s\n", p.File, p.Line, p.Severity, p.Reason)
			}
			return exitProblems, nil
		}
		oldX, _ := old.WithListings(listings)
		nextX, d1, err := oldX.Update(ctx, git, dir, pos[2])
		if err != nil {
			return 0, err
		}
		_, d2 := nextX.WithListings(listings)
		oldID, newID, d = old.Commit(), next.Commit(), d1.Then(d2)
		d.ListersAdded, d.ListersRemoved = delta.ListersAdded, delta.ListersRemoved
	} else if *full {
		old, err := catalog.Load(ctx, git, dir, pos[1], opt)
		if err != nil {
			return 0, err
		}
		next, delta, err := old.Update(ctx, git, dir, pos[2])
		if err != nil {
			return 0, err
		}
		oldID, newID, d = old.Commit(), next.Commit(), delta
	} else if oldID, newID, d, err = catalog.Diff(ctx, git, dir, pos[1], pos[2], opt); err != nil {
		return 0, err
	}
	r := diffReport{Old: oldID, New: newID, Added: keys(d.Added), Removed: keys(d.Removed), Changed: keys(d.Changed),
		ListersAdded: patterns(d.ListersAdded), ListersRemoved: patterns(d.ListersRemoved)}
	if *asJSON {
		return exitOK, writeJSON(stdout, r)
	}
	for _, l := range []struct {
		mark    string
		listers []catalog.Lister
	}{{"+", d.ListersAdded}, {"-", d.ListersRemoved}} {
		for _, x := range l.listers {
			fmt.Fprintf(stdout, "%s lister %s (%s:%d)\n", l.mark, x.Pattern, x.File, x.Line)
		}
	}
	for _, l := range []struct {
		mark string
		keys []string
	}{{"+", r.Added}, {"-", r.Removed}, {"~", r.Changed}} {
		for _, k := range l.keys {
			fmt.Fprintf(stdout, "%s %s\n", l.mark, k)
		}
	}
	fmt.Fprintf(stdout, "%.12s..%.12s: %d added, %d removed, %d changed\n", r.Old, r.New, len(r.Added), len(r.Removed), len(r.Changed))
	return exitOK, nil
}

// keys lists the keys of es (never nil, for JSON).
func keys(es []catalog.Entry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Key.String())
	}
	return out
}

func gen(ctx context.Context, git *gitcmd.Runner, args []string, stdout io.Writer) (int, error) {
	fs := newFlags("gen")
	repos := fs.Int("repos", 0, "number of entries")
	perFile := fs.Int("per-file", 1000, "entries per .list file")
	pos, err := parseArgs(fs, args, 1, 1)
	if err != nil {
		return 0, err
	}
	dir := pos[0]
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		return 0, fmt.Errorf("%s already holds a git repository: give a new directory", dir)
	}
	_, statErr := os.Stat(dir)
	commit, err := catalog.Generate(ctx, git, dir, *repos, *perFile)
	if err != nil {
		// Leave nothing half-made behind: what gen created goes.
		if errors.Is(statErr, os.ErrNotExist) {
			os.RemoveAll(dir)
		} else {
			os.RemoveAll(filepath.Join(dir, ".git"))
		}
		return 0, err
	}
	fmt.Fprintf(stdout, "%s: %d entries in %d files at %s\n", pos[0], *repos, (*repos+*perFile-1) / *perFile, commit)
	return exitOK, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}
