package engine_test

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestLayers checks the README's list of which package imports which
// against `go list`: every import of another package of the module is
// listed, and every listed one is real.
func TestLayers(t *testing.T) {
	goBin := testenv.NeedsTool(t, "go")[0]
	const module = "github.com/bashvisor/bashvisor/"
	out, err := exec.Command(goBin, "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, "../...").Output()
	if err != nil {
		t.Fatal(err)
	}
	real := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		pkg = strings.TrimPrefix(pkg, module)
		for _, imp := range strings.Fields(imports) {
			if dep, ok := strings.CutPrefix(imp, module); ok && !strings.HasSuffix(dep, "pb") {
				real[pkg] = append(real[pkg], dep)
			}
		}
	}
	readme, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer readme.Close()
	listed := map[string][]string{}
	for sc := bufio.NewScanner(readme); sc.Scan(); {
		pkg, deps, ok := strings.Cut(sc.Text(), "─→")
		if !ok || strings.Contains(pkg, "|") {
			continue
		}
		for _, d := range strings.Split(deps, ",") {
			listed[strings.TrimSpace(pkg)] = append(listed[strings.TrimSpace(pkg)], strings.TrimSpace(d))
		}
	}
	if len(listed) == 0 {
		t.Fatal("the README lists no layers")
	}
	for pkg, deps := range real {
		for _, d := range deps {
			if !slices.Contains(listed[pkg], d) {
				t.Errorf("%s imports %s: not in the README's layers", pkg, d)
			}
		}
	}
	for pkg, deps := range listed {
		for _, d := range deps {
			if !slices.Contains(real[pkg], d) {
				t.Errorf("the README says %s imports %s: it does not", pkg, d)
			}
		}
	}
}
