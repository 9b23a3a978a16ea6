package docs

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/gitfleet/gitfleet/"

// TestNoRoleImportsAnother holds the roles apart, as the code map draws
// them: the partial node's code (node) imports neither the coordinator,
// nor the full node, nor the full node's API; the coordinator imports no
// node; the full node owns a node but never imports the coordinator; and
// the API, the full node's, imports no role. An import counts directly or
// through any package of the module (`go list -deps`), read from the
// source by go/parser so that the rule holds in CI.
func TestNoRoleImportsAnother(t *testing.T) {
	deps := moduleImports(t)
	if _, ok := closure(deps, "internal/fullnode")["internal/node"]; !ok {
		t.Fatal("the walk of imports misses the full node's import of node")
	}
	for pkg, forbidden := range map[string][]string{
		"internal/node":        {"internal/coordinator", "internal/fullnode", "internal/api"},
		"internal/coordinator": {"internal/node", "internal/fullnode", "internal/api"},
		"internal/fullnode":    {"internal/coordinator"},
		"internal/api":         {"internal/coordinator", "internal/fullnode", "internal/node"},
	} {
		if _, ok := deps[pkg]; !ok {
			t.Fatalf("no package %s: the rule names a package the tree lacks", pkg)
		}
		all := closure(deps, pkg)
		for _, f := range forbidden {
			if path, ok := all[f]; ok {
				t.Errorf("%s imports %s: %s", pkg, f, strings.Join(path, " -> "))
			}
		}
	}
}

// moduleImports maps each package of the module (its path in the module,
// "internal/node") to the packages of the module its non-test files import,
// under any build constraint.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != ".." && (n == "testdata" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel("..", filepath.Dir(p))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if dep, ok := strings.CutPrefix(path, module); ok && !slices.Contains(out[pkg], dep) {
				out[pkg] = append(out[pkg], dep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// closure returns every package that pkg imports, directly or not, each
// with a chain of imports that leads to it.
func closure(deps map[string][]string, pkg string) map[string][]string {
	seen := map[string][]string{}
	queue := [][]string{{pkg}}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		for _, d := range deps[path[len(path)-1]] {
			if _, ok := seen[d]; ok || d == pkg {
				continue
			}
			next := append(slices.Clone(path), d)
			seen[d] = next
			queue = append(queue, next)
		}
	}
	return seen
}
