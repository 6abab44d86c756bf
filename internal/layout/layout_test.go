// Package layout holds the checks that keep the agent's shape as issue 16
// left it: a loop package that knows nothing of NATS, a small Agent, short
// functions in agent/ and cmd/, and a thin main. They fail a change that
// grows the shape back, with what grew and where.
package layout

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	maxFuncLines   = 80    // per function, signature to closing brace
	maxAgentFields = 15    // in agent.Agent
	maxMainLines   = 1_000 // non-test code of cmd/edge-agent
)

// root is the module's root, two levels up from this package.
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", r, err)
	}
	return r
}

// sources returns the non-test Go files under dir.
func sources(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no Go sources under %s", dir)
	}
	return out
}

func TestFunctionsAreShort(t *testing.T) {
	r := root(t)
	fset := token.NewFileSet()
	for _, dir := range []string{"agent", "cmd"} {
		for _, p := range sources(t, filepath.Join(r, dir)) {
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
				if lines > maxFuncLines {
					rel, _ := filepath.Rel(r, p)
					t.Errorf("%s: %s is %d lines, more than %d", rel, fn.Name.Name, lines, maxFuncLines)
				}
			}
		}
	}
}

func TestAgentIsSmall(t *testing.T) {
	r := root(t)
	fset := token.NewFileSet()
	fields := -1
	for _, p := range sources(t, filepath.Join(r, "agent")) {
		if filepath.Dir(p) != filepath.Join(r, "agent") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != "Agent" {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return false
			}
			fields = 0
			for _, fl := range st.Fields.List {
				fields += max(len(fl.Names), 1) // an embedded field has no name
			}
			return false
		})
	}
	if fields < 0 {
		t.Fatal("no struct type Agent in package agent")
	}
	if fields > maxAgentFields {
		t.Errorf("agent.Agent has %d fields, more than %d", fields, maxAgentFields)
	}
}

func TestMainIsThin(t *testing.T) {
	r := root(t)
	total := 0
	for _, p := range sources(t, filepath.Join(r, "cmd", "edge-agent")) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		total += bytes.Count(b, []byte("\n"))
	}
	if total > maxMainLines {
		t.Errorf("cmd/edge-agent has %d lines of non-test code, more than %d", total, maxMainLines)
	}
}

func TestLoopKnowsNoNATS(t *testing.T) {
	r := root(t)
	cmd := exec.Command("go", "list", "-deps", "./agent")
	cmd.Dir = r
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./agent: %v", err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		n++
		if strings.Contains(sc.Text(), "nats-io") {
			t.Errorf("package agent depends on %s", sc.Text())
		}
	}
	if n < 10 {
		t.Fatalf("go list -deps ./agent listed %d packages: %s", n, out)
	}
}
