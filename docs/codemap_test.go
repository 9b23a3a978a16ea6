package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheCodeMapNamesEveryPackage holds ARCHITECTURE.md to the tree: every
// directory of internal/ with Go code in it is named there, so that a new
// package cannot arrive without a line that says what it owns.
func TestTheCodeMapNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	root := filepath.Join("..", "internal")
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || p == root {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		gofiles, err := filepath.Glob(filepath.Join(p, "*.go"))
		if err != nil || len(gofiles) == 0 {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if name := filepath.ToSlash(rel); !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("ARCHITECTURE.md does not name the package `%s`", name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
