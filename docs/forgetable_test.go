package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gitfleet/gitfleet/internal/forge"
)

// TestNoListOfForgesOutsideTheTable holds "a forge: one row" to the code:
// outside internal/forge, no Go code (tests aside) names a kind of forge,
// by its constant (forge.GitHub), in an identifier (WebhookSecretGitHub) or
// in a string ("github", a flag's name or help), so that adding a forge
// touches its row, its client and its test, and nothing else. Hosts
// ("github.com") are addresses, not kinds, and may be named.
func TestNoListOfForgesOutsideTheTable(t *testing.T) {
	var names []string
	for _, k := range forge.Kinds() {
		names = append(names, regexp.QuoteMeta(string(k)))
	}
	// A kind as a word of its own, not a part of a host, a path or a
	// token's prefix ("github_pat_", repokey's).
	word := regexp.MustCompile(`(?i)(^|[^a-z0-9./_])(` + strings.Join(names, "|") + `)($|[^a-z0-9./_])`)
	inName := regexp.MustCompile(`(?i)` + strings.Join(names, "|"))
	constants := kindConstants(t)

	fset := token.NewFileSet()
	for _, dir := range []string{"../cmd", "../internal"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if filepath.ToSlash(p) == "../internal/forge" || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			imports := map[*ast.BasicLit]bool{}
			for _, imp := range f.Imports {
				imports[imp.Path] = true
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr:
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "forge" && constants[n.Sel.Name] {
						t.Errorf("%s: forge.%s: a kind of forge named outside forge's table", fset.Position(n.Pos()), n.Sel.Name)
					}
					return false
				case *ast.Ident:
					if inName.MatchString(n.Name) {
						t.Errorf("%s: %s: a kind of forge in a name outside forge's table", fset.Position(n.Pos()), n.Name)
					}
				case *ast.BasicLit:
					if n.Kind != token.STRING || imports[n] {
						return true
					}
					s, err := strconv.Unquote(n.Value)
					if err != nil {
						s = n.Value
					}
					if m := word.FindStringSubmatch(s); m != nil {
						t.Errorf("%s: %q: a kind of forge in a string outside forge's table", fset.Position(n.Pos()), m[2])
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// kindConstants are the names of forge's constants of type Kind.
func kindConstants(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("../internal/forge/*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "Kind" {
					for _, n := range vs.Names {
						out[n.Name] = true
					}
				}
			}
		}
	}
	if len(out) != len(forge.Kinds()) {
		t.Fatalf("forge declares %d constants of type Kind, its table has %d kinds", len(out), len(forge.Kinds()))
	}
	return out
}
