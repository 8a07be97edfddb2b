// Package docs_test keeps the documentation true: the tests, benchmarks
// and files that README.md and docs/*.md cite exist, and every package's
// doc, as go doc shows it, starts by naming the package.
package docs_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// root is the module's root, seen from this package's directory.
const root = ".."

// docFiles returns README.md and docs/*.md, each with its text.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, name := range append([]string{filepath.Join(root, "README.md")}, names...) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, name)
		docs[rel] = string(b)
	}
	if len(docs) < 2 {
		t.Fatalf("found %d documents, want README.md and docs/*.md", len(docs))
	}
	return docs
}

// funcDecl matches a test or benchmark function of the module.
var funcDecl = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)\w+)\(`)

// moduleFuncs returns the names of every Test and Benchmark function in
// the module's Go files (testdata and hidden directories left out).
func moduleFuncs(t *testing.T) map[string]bool {
	t.Helper()
	funcs := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (n == "testdata" || strings.HasPrefix(n, ".") || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range funcDecl.FindAllSubmatch(b, -1) {
			funcs[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !funcs["TestLayers"] {
		t.Fatalf("found %d test functions, and not engine's TestLayers: the walk is wrong", len(funcs))
	}
	return funcs
}

// cited matches a test or benchmark name in a document: TestName,
// TestName/subtest (the parent is checked), or TestPrefix… (some function
// starts with it).
var cited = regexp.MustCompile(`\b(?:Test|Benchmark)[A-Z0-9_]\w*(…)?`)

// Every Test… and Benchmark… name a document cites is a function of the
// module: a renamed or deleted test shows up here, not in a reader's
// search.
func TestCitedTestsExist(t *testing.T) {
	funcs := moduleFuncs(t)
	n := 0
	for doc, text := range docFiles(t) {
		for _, m := range cited.FindAllStringSubmatch(text, -1) {
			n++
			name, prefix := strings.TrimSuffix(m[0], "…"), m[1] != ""
			if funcs[name] || prefix && hasPrefix(funcs, name) {
				continue
			}
			t.Errorf("%s cites %s: no func %s in the module", doc, m[0], name)
		}
	}
	if n == 0 {
		t.Error("the documents cite no tests: the pattern is wrong")
	}
}

func hasPrefix(funcs map[string]bool, prefix string) bool {
	for f := range funcs {
		if strings.HasPrefix(f, prefix) {
			return true
		}
	}
	return false
}

// link matches a markdown link's target.
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// Every relative link of a document names a file or directory of the
// repository, and a heading of that file when it names one (#anchor).
func TestRelativeLinksExist(t *testing.T) {
	for doc, text := range docFiles(t) {
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target, anchor, _ := strings.Cut(m[1], "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			p := filepath.Join(root, filepath.Dir(doc), filepath.FromSlash(target))
			if target == "" {
				p = filepath.Join(root, doc)
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s links to %s: %v", doc, target, err)
				continue
			}
			if anchor != "" && !anchors(t, p)[anchor] {
				t.Errorf("%s links to %s#%s: no such heading there", doc, target, anchor)
			}
		}
	}
}

// heading matches a markdown heading outside code blocks.
var heading = regexp.MustCompile(`^#{1,6} +(.+?) *#*$`)

// anchors returns the anchors GitHub makes for the headings of a markdown
// file: lower case, punctuation but '-' and '_' dropped, spaces made '-'.
func anchors(t *testing.T, name string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	fenced := false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		m := heading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		var a strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				a.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				a.WriteRune(r)
			}
		}
		set[a.String()] = true
	}
	return set
}

// pkgInfo is what go list says of a package.
type pkgInfo struct {
	ImportPath, Name, Doc string
	GoFiles               []string
}

// Every package's doc, as go doc shows it (go list's synopsis, the first
// sentence of the comment attached to a package clause), starts with
// "Package NAME" ("Command NAME" for a program): a doc detached from its
// package clause by a blank line shows nothing, and a doc that starts
// elsewhere reads wrongly in every listing.
func TestPackageDocsNameThePackage(t *testing.T) {
	goBin := testenv.NeedsTool(t, "go")[0]
	cmd := exec.Command(goBin, "list", "-json=ImportPath,Name,Doc,GoFiles", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p pkgInfo
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if len(p.GoFiles) == 0 {
			continue // tests only: go doc shows nothing
		}
		n++
		want := "Package " + p.Name + " "
		if p.Name == "main" {
			want = "Command " + path.Base(p.ImportPath) + " "
		}
		if !strings.HasPrefix(p.Doc, want) {
			t.Errorf("%s: the doc go doc shows starts %q, want %q", p.ImportPath, first(p.Doc), want+"…")
		}
	}
	if n < 20 {
		t.Errorf("go list showed %d packages with Go files: the listing is wrong", n)
	}
}

// first returns the first few words of s.
func first(s string) string {
	if f := strings.Fields(s); len(f) > 6 {
		return strings.Join(f[:6], " ") + " …"
	}
	return s
}
