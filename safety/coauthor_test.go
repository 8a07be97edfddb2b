package safety

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const testTrailer = "Bash Visor <bot@bashvisor.dev>"

func TestAddCoAuthorText(t *testing.T) {
	ins := ` --trailer "Co-authored-by: ` + testTrailer + `"`
	cases := []struct{ cmd, want string }{
		{"git commit -m x", "git commit" + ins + " -m x"},
		{`git commit -m "fix: thing"`, `git commit` + ins + ` -m "fix: thing"`},
		{"git -C repo -c user.name=x commit -am y", "git -C repo -c user.name=x commit" + ins + " -am y"},
		{"git --git-dir=.git commit -m y -- a.go", "git --git-dir=.git commit" + ins + " -m y -- a.go"},
		{"git add a.go && git commit -m y", "git add a.go && git commit" + ins + " -m y"},
		{"git commit -m a; git commit --amend --no-edit", "git commit" + ins + " -m a; git commit" + ins + " --amend --no-edit"},
		{"sudo -u me git commit -m y", "sudo -u me git commit" + ins + " -m y"},
		{"GIT_AUTHOR_NAME=x git commit -m y", "GIT_AUTHOR_NAME=x git commit" + ins + " -m y"},
		{"(cd r && git commit -m y)", "(cd r && git commit" + ins + " -m y)"},
		{"git commit", "git commit" + ins},
		// not commits
		{"git show commit", "git show commit"},
		{"git log --grep commit", "git log --grep commit"},
		{"echo git commit", "echo git commit"},
		{`git commit-tree x`, `git commit-tree x`},
		{`echo "git commit -m x"`, `echo "git commit -m x"`},
		{"git status", "git status"},
		// already has the trailer: unchanged
		{"git commit" + ins + " -m x", "git commit" + ins + " -m x"},
		{"git commit -m \"x\n\nCo-authored-by: " + testTrailer + "\"", "git commit -m \"x\n\nCo-authored-by: " + testTrailer + "\""},
		// unparseable: unchanged
		{"git commit -m 'x", "git commit -m 'x"},
	}
	for _, tc := range cases {
		if got := AddCoAuthor(tc.cmd, testTrailer); got != tc.want {
			t.Errorf("AddCoAuthor(%q) =\n  %q\nwant\n  %q", tc.cmd, got, tc.want)
		}
		// idempotent
		once := AddCoAuthor(tc.cmd, testTrailer)
		if twice := AddCoAuthor(once, testTrailer); twice != once {
			t.Errorf("AddCoAuthor not idempotent on %q: %q", tc.cmd, twice)
		}
	}
	if got := AddCoAuthor("git commit -m x", ""); got != "git commit -m x" {
		t.Errorf("empty trailer changed the command: %q", got)
	}
	// quoting of awkward names
	got := AddCoAuthor("git commit -m x", `A "B" $C <a@b>`)
	if !strings.Contains(got, `--trailer "Co-authored-by: A \"B\" \$C <a@b>"`) {
		t.Errorf("awkward trailer quoted wrongly: %q", got)
	}
}

// TestAddCoAuthorRealGit runs rewritten commands in a real repository and
// checks the commit message carries exactly one trailer.
func TestAddCoAuthorRealGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	env := append(os.Environ(),
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=t@example.com",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	run := func(cmd string) string {
		t.Helper()
		c := exec.Command("bash", "-c", cmd)
		c.Dir = dir
		c.Env = env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", cmd, err, out)
		}
		return string(out)
	}
	run("git init -q . && git config commit.gpgsign false")
	want := "Co-authored-by: " + testTrailer
	count := func() int {
		return strings.Count(run("git log -1 --format=%B"), want)
	}
	steps := []string{
		`echo a > a.txt && git add a.txt && git commit -q -m "first change"`,
		`echo b > b.txt && git add b.txt && git -c core.quotepath=off commit -q -m "second" -- b.txt`,
		`echo c > c.txt && git add c.txt && git commit -q -F - <<'EOF'
third

body text
EOF`,
	}
	for _, s := range steps {
		cmd := AddCoAuthor(s, testTrailer)
		if cmd == s {
			t.Fatalf("not rewritten: %q", s)
		}
		run(cmd)
		if n := count(); n != 1 {
			t.Fatalf("after %q: %d trailers, want 1:\n%s", cmd, n, run("git log -1 --format=%B"))
		}
	}
	// Re-running the rewritten amend adds no second trailer.
	amend := AddCoAuthor("git commit -q --amend --no-edit", testTrailer)
	run(amend)
	run(AddCoAuthor(amend, testTrailer))
	if n := count(); n != 1 {
		t.Fatalf("after amend: %d trailers, want 1:\n%s", n, run("git log -1 --format=%B"))
	}
	if n := strings.Count(run("git log --format=%B"), want); n != 3 {
		t.Fatalf("history has %d trailers, want 3", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "c.txt")); err != nil {
		t.Fatal(err)
	}
}
