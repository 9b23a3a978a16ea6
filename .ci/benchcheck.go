//go:build ignore

// benchcheck reads the output of CI's run of every benchmark once
// (go test ./... -run '^$' -bench . -benchtime 1x -short) on its standard
// input, passes it through, and fails unless every benchmark that the
// module's test files declare gave a result: a benchmark that was skipped
// whole, that a package's failure left unrun, that reported a figure that
// is not a number (NaN, Inf: a ratio over an input too small to hold what
// it counts), or that reports figures of its own (b.ReportMetric) and gave
// none (it returned before its loop: go test still prints a time for it)
// fails the build, as one that fails does.
//
//	go test ./... -run '^$' -bench . -benchtime 1x -short | go run .ci/benchcheck.go
package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	declared, err := declaredBenchmarks(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchcheck:", err)
		os.Exit(2)
	}
	ran := map[string]bool{}      // "package.BenchmarkName"
	reported := map[string]bool{} // ran, with a figure of its own
	var problems []string
	pkg := ""
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Println(line)
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "--- SKIP: "); ok {
			if name = strings.Fields(name)[0]; strings.HasPrefix(name, "Benchmark") && !strings.Contains(name, "/") {
				problems = append(problems, fmt.Sprintf("%s.%s skipped: it must run, with a tiny input under -short", pkg, name))
			}
			continue
		}
		name, figures, ok := result(line)
		if !ok {
			continue
		}
		ran[pkg+"."+name] = true
		for unit, v := range figures {
			if !goTestUnits[unit] {
				reported[pkg+"."+name] = true
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				problems = append(problems, fmt.Sprintf("%s: %s reported %v %s", pkg, strings.Fields(line)[0], v, unit))
			}
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "benchcheck: reading the output:", err)
		os.Exit(2)
	}
	for _, b := range declared {
		switch {
		case !ran[b.name]:
			problems = append(problems, b.name+" gave no result")
		case b.reports && !reported[b.name]:
			problems = append(problems, b.name+" reported none of its figures (b.ReportMetric): did it return before its loop?")
		}
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "benchcheck: %d of %d benchmarks did not run whole:\n  %s\n", len(problems), len(declared), strings.Join(problems, "\n  "))
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "benchcheck: all %d benchmarks ran\n", len(declared))
}

// goTestUnits are the figures go test reports itself.
var goTestUnits = map[string]bool{"ns/op": true, "B/op": true, "allocs/op": true, "MB/s": true}

// resultLine is a benchmark's result: its name (with the GOMAXPROCS
// suffix when above 1), its iterations, and figures with their units.
var resultLine = regexp.MustCompile(`^(Benchmark\S*)\s+(\d+)\s+(.*)$`)

// result parses a result line into the top-level benchmark's name and the
// figures by unit.
func result(line string) (string, map[string]float64, bool) {
	m := resultLine.FindStringSubmatch(line)
	if m == nil {
		return "", nil, false
	}
	fields := strings.Fields(m[3])
	if len(fields) < 2 || len(fields)%2 != 0 {
		return "", nil, false
	}
	figures := map[string]float64{}
	for i := 0; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return "", nil, false
		}
		figures[fields[i+1]] = v
	}
	name, _, _ := strings.Cut(m[1], "/")
	if i := strings.LastIndexByte(name, '-'); i > 0 && !strings.Contains(m[1], "/") {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i]
		}
	}
	return name, figures, true
}

// benchmark is one that a test file declares.
type benchmark struct {
	name    string // "import/path.BenchmarkName"
	reports bool   // its body calls ReportMetric
}

// declaredBenchmarks lists the benchmarks of the module at root.
func declaredBenchmarks(root string) ([]benchmark, error) {
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	modPath := ""
	for l := range strings.Lines(string(mod)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			modPath = strings.TrimSpace(p)
		}
	}
	var out []benchmark
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(p, "_test.go"):
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		imp := path.Join(modPath, filepath.ToSlash(rel))
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Benchmark") && takesB(fn) {
				out = append(out, benchmark{name: imp + "." + fn.Name.Name, reports: callsReportMetric(fn)})
			}
		}
		return nil
	})
	slices.SortFunc(out, func(a, b benchmark) int { return strings.Compare(a.name, b.name) })
	return out, err
}

// callsReportMetric reports whether fn's body (its closures too) calls a
// method named ReportMetric.
func callsReportMetric(fn *ast.FuncDecl) bool {
	found := false
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "ReportMetric" {
			found = true
		}
		return !found
	})
	return found
}

// takesB reports whether fn is func(b *testing.B), as go test's benchmarks are.
func takesB(fn *ast.FuncDecl) bool {
	ps := fn.Type.Params.List
	if len(ps) != 1 || len(ps[0].Names) > 1 {
		return false
	}
	star, ok := ps[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "B"
}
