package repokey

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseTakesOnlyCanonicalKeys(t *testing.T) {
	for _, key := range []string{"github.com/a/b", "gitlab.com/U/Case", "[::1]:8080/a/b", "h.example/x.lock"} {
		if k, err := Parse(key); err != nil || k.String() != key {
			t.Errorf("Parse(%q) = %q, %v", key, k, err)
		}
	}
	for _, key := range []string{"", "github.com/A/b", "GitHub.com/a/b", "/etc/passwd", "github.com/../x",
		"github.com/a/b.git", "h:0080/a", "[fe80::1%eth0]:80/a", "h.example/-x", "h.example/a\u212a"} {
		if k, err := Parse(key); err == nil {
			t.Errorf("Parse(%q) = %q, want an error", key, k)
		}
	}
}

func TestAKeyGivesItsHostAndDirectory(t *testing.T) {
	k, err := Parse("git.example.org:8443/Owner/repo")
	if err != nil {
		t.Fatal(err)
	}
	if got := k.Host(); got != "git.example.org:8443" {
		t.Errorf("Host = %q", got)
	}
	if got := k.Dir(); got != "git.example.org:8443/!owner/repo" {
		t.Errorf("Dir = %q", got)
	}
}

func TestKeyOfDirRefusesADirectoryThatSpellsNoKey(t *testing.T) {
	// Escaped correctly, but not a key that Parse would take: a mirror
	// store must not trust such a directory's name.
	for _, dir := range []string{"h.example/.git/x", "h.example/a/b.git", "h.example/../x", "h.example"} {
		if k, err := KeyOfDir(dir); err == nil {
			t.Errorf("KeyOfDir(%q) = %q, want an error", dir, k)
		}
	}
}

// TestNoKeyIsMadeFromAnUncheckedString reads the tree: outside this
// package and outside tests, a Key comes from a parser (Parse, KeyOfDir),
// never from a conversion of a string that nothing checked. A conversion
// would let a key from the wire reach a data directory unvalidated, the
// thing Key exists to rule out. The one exception is named here, with why
// the string it converts was a Key already.
func TestNoKeyIsMadeFromAnUncheckedString(t *testing.T) {
	trusted := map[string]string{
		"coordinator.storedKey": "a key the coordinator wrote itself from a Key: its own store's records, a unit's name on the tier",
	}
	const self = "github.com/gitfleet/gitfleet/internal/repokey"
	top := filepath.Join("..", "..")
	var found []string
	for _, root := range []string{filepath.Join(top, "internal"), filepath.Join(top, "cmd")} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || p == filepath.Join(top, "internal", "repokey") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			var names []string // what this file calls the package
			for _, imp := range f.Imports {
				if path, _ := strconv.Unquote(imp.Path.Value); path == self {
					name := "repokey"
					if imp.Name != nil {
						name = imp.Name.Name
					}
					names = append(names, name)
				}
			}
			if len(names) == 0 {
				return nil
			}
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
					if _, ok := trusted[f.Name.Name+"."+fn.Name.Name]; ok {
						continue
					}
				}
				ast.Inspect(d, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					fun := ast.Unparen(call.Fun)
					if sel, ok := fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Key" {
						if pkg, ok := sel.X.(*ast.Ident); ok && slices.Contains(names, pkg.Name) {
							found = append(found, fset.Position(call.Pos()).String())
						}
					}
					return true
				})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range found {
		t.Errorf("%s: a repokey.Key converted from a string: parse it at the edge (repokey.Parse)", f)
	}
}

// TestKeysAreCheckedWhereTheyArrive reads the packages that carry a Key
// inside a process: the pure cores (pullplan, repoview, schedule,
// placement, network) never check a key, and the shells (the catalog, the
// coordinator, the API, the node and the full node) check one only in the
// functions where it arrives (a catalog's line, an API call's path or URL,
// a webhook's payload, a message from another process), named here with
// the edge they are. A check anywhere else is a key checked twice on its
// way, which the Key type exists to end: take the Key from where it was
// parsed. A key that a message names and that must be one the fleet
// places already (a node's result or hand-back, a full node's FetchNow, a
// feed's push) is not parsed but looked up: placement.Engine.Key returns
// the Key the engine holds, or nothing.
func TestKeysAreCheckedWhereTheyArrive(t *testing.T) {
	edges := map[string]map[string]string{
		"pullplan":  {},
		"repoview":  {},
		"schedule":  {},
		"placement": {},
		"network": {
			"CheckAnyName": "a network's name as the API is asked to filter by it, which may name a key (fork:KEY)",
		},
		"catalog": {
			"parseListWith": "a line of a .list file",
			"addEntry":      "the URLs of a YAML entry",
			"parseLister":   "a lister line (HOST/OWNER/*): the owner it names, as a probe key",
			"listingFile":   "a forge's listing of an owner: the owner's prefix its names must keep",
		},
		"coordinator": {
			"AddRepo":      "an API call's URL, passed on by a full node",
			"RemoveRepo":   "an API call's key, passed on by a full node",
			"inventory":    "a node's inventory of what it holds",
			"askFeed":      "a forge feed's answer: the repositories it says it does not know, and those it renamed",
			"checkRenamed": "a node's check result: the key its upstream's git server redirected to",
			"feedAskByID":  "a forge feed's answer: the repositories it does not know, asked again by number",
		},
		"api": {
			"pathKey":           "an API call's path (GET, PATCH, DELETE, fetch, log)",
			"subPath":           "an API call's path, to tell a repository's log or archive from a repository",
			"normalizeUpstream": "an API call's upstream URL",
			"candidates":        "a webhook payload's URLs",
			"autoAdded":         "a webhook payload's repository name, on a forge of this mirror",
			"RepoOf":            "a read another full node relayed, by its path",
		},
		"node": {
			"assign":           "an assignment from the coordinator (its URL and key)",
			"drop":             "a drop from the coordinator",
			"refuseAssignment": "an assignment refused: whether its key can be reported",
			"ServeFailed":      "gitserve's report of a failed upload-pack",
		},
		"fullnode": {
			"states":       "the coordinator's repository states",
			"removed":      "the coordinator's removals",
			"keyOf":        "a key from the console, or the coordinator's answer to an addition",
			"hintFromFeed": "a forge feed's push, forwarded by the coordinator",
			"tierDropped":  "the coordinator's tier drops",
		},
	}
	const self = "github.com/gitfleet/gitfleet/internal/repokey"
	for pkg, allowed := range edges {
		dir := filepath.Join("..", pkg)
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			name := e.Name()
			if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			p := filepath.Join(dir, name)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			imported := ""
			for _, imp := range f.Imports {
				if path, _ := strconv.Unquote(imp.Path.Value); path == self {
					imported = "repokey"
					if imp.Name != nil {
						imported = imp.Name.Name
					}
				}
			}
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
					if !ok {
						return true
					}
					x, _ := sel.X.(*ast.Ident)
					checks := sel.Sel.Name == "Canonical" || sel.Sel.Name == "AddFast" ||
						x != nil && imported != "" && x.Name == imported && slices.Contains([]string{"Parse", "Check", "Normalize", "KeyOfDir"}, sel.Sel.Name)
					if _, edge := allowed[fn.Name.Name]; checks && !edge {
						t.Errorf("%s: %s checks a key in %s, not where the key arrives: take the repokey.Key from the edge that parsed it",
							fset.Position(call.Pos()), sel.Sel.Name, fn.Name.Name)
					}
					return true
				})
			}
		}
	}
}
