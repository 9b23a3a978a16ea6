package child

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// early are the packages that a Go program initialises before most others
// (gitfleet: before gRPC and protobuf), and so all that this package may
// import: package strings, say, needs package unicode, which starts late.
var early = map[string]bool{"errors": true, "os": true, "os/signal": true, "runtime": true, "strconv": true,
	"syscall": true, "unsafe": true}

func TestTheChildImportsOnlyPackagesThatStartEarly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !early[path] {
				t.Errorf("%s imports %s: its init, and all that it needs, would run before the child's in every child", name, path)
			}
		}
	}
}
