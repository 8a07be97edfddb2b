package safety

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/internal/testenv"
	"pgregory.net/rapid"
)

// discardRepo makes a repository in which every form of the git-discard
// grammar loses something: f holds an uncommitted change (WORK), s a
// staged one (STAGED), u is an untracked file, one stash entry exists,
// HEAD~1 and branch other exist.
func discardRepo(t *testing.T, git string) string {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		c := exec.Command(git, args...)
		c.Dir = dir
		c.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("init", "-q", "-b", "main")
	write("f", "v1\n")
	write("s", "s1\n")
	run("add", "f", "s")
	run("commit", "-qm", "one")
	run("branch", "other")
	write("f", "v2\n")
	run("commit", "-qam", "two")
	write("f", "stashed\n")
	run("stash", "-q")
	write("f", "WORK\n")
	write("s", "STAGED\n")
	run("add", "s")
	write("u", "UNTRACKED\n")
	return dir
}

// lost reports whether what kind of work ("tree": f's change, "staged":
// s's, "untracked": u, "stash": the stash entry, "worktree": the change to
// f in linked work tree wt, "submodule": the change to a in submodule sm,
// "reflog": the commit reflogSetup left named by HEAD's reflog only) is
// gone from repository dir.
func lost(t *testing.T, git, dir, what string) bool {
	t.Helper()
	changed := func(name, text string) bool {
		b, err := os.ReadFile(filepath.Join(dir, name))
		return err != nil || string(b) != text
	}
	switch what {
	case "tree":
		return changed("f", "WORK\n")
	case "staged":
		return changed("s", "STAGED\n")
	case "worktree":
		return changed("wt/f", "X\n")
	case "submodule":
		return changed("sm/a", "X\n")
	case "untracked":
		_, err := os.Stat(filepath.Join(dir, "u"))
		return err != nil
	case "reflog":
		b, err := os.ReadFile(filepath.Join(dir, ".git", "dangling"))
		if err != nil || len(b) < 40 {
			t.Fatalf("reflogSetup made no commit: %v", err)
		}
		c := exec.Command(git, "rev-list", "--all", "--reflog")
		c.Dir = dir
		out, err := c.Output()
		if err != nil {
			t.Fatalf("git rev-list: %v", err)
		}
		return !strings.Contains(string(out), strings.TrimSpace(string(b)))
	}
	c := exec.Command(git, "stash", "list")
	c.Dir = dir
	out, err := c.Output()
	if err != nil {
		t.Fatalf("git stash list: %v", err)
	}
	return len(strings.TrimSpace(string(out))) == 0
}

// discardForm draws one spelling of a git form that discards work, what
// it loses and the shell code that sets it up: options before or after
// the operands, abbreviations of long options, clustered short options,
// with or without --, pathspecs that name the whole tree.
func discardForm(t *rapid.T) (setup string, words []string, what string) {
	if rapid.IntRange(0, 13).Draw(t, "family") >= 8 {
		return discardFormMore(t)
	}
	words, what = discardFormBasic(t)
	return "", words, what
}

// discardFormBasic draws the forms of discardForm with porcelain.
func discardFormBasic(t *rapid.T) (words []string, what string) {
	pick := func(label string, xs ...string) string { return rapid.SampledFrom(xs).Draw(t, label) }
	pathspec := func() string {
		return pick("pathspec", ".", "./", ":/", "':(top)'", "'*'", `"$(git rev-parse --show-toplevel)"`,
			`"$PWD"`, `$(pwd)`, `"$(pwd)/"`, "':/*'", "sub/..", `"$p"`, "':!x'", "':^x'", "':(exclude)x'", "':/!x'")
	}
	switch rapid.IntRange(0, 7).Draw(t, "form") {
	case 0: // git checkout -f BRANCH
		force := pick("force", "-f", "--force", "--forc", "--fo", "-fq", "-qf")
		return append([]string{"checkout"}, order(t, []string{force}, "other")...), "tree"
	case 1: // git checkout -f (to HEAD)
		return []string{"checkout", pick("force", "-f", "--force", "--for", "-qf")}, "tree"
	case 2: // git checkout [REV] [--] PATHSPEC
		rev := pick("rev", "", "HEAD", "HEAD~1", "@", "other")
		w := []string{"checkout"}
		if rev != "" {
			w = append(w, rev)
		}
		if rev != "" || rapid.Bool().Draw(t, "--") {
			w = append(w, "--")
		}
		return append(w, pathspec()), "tree"
	case 3: // git restore [--source=REV] [-W] PATHSPEC
		var opts []string
		if s := pick("source", "", "--source=HEAD", "-s HEAD", "--sour=HEAD~1", "--source other", "-sHEAD"); s != "" {
			opts = append(opts, strings.Fields(s)...)
		}
		if wt := pick("worktree", "", "-W", "--worktree", "-SW", "--staged --worktree", "--work"); wt != "" {
			opts = append(opts, strings.Fields(wt)...)
		}
		if rapid.Bool().Draw(t, "--") {
			return append(append([]string{"restore"}, opts...), "--", pathspec()), "tree"
		}
		return append([]string{"restore"}, order(t, opts, pathspec())...), "tree"
	case 4: // git reset --hard [REV]
		hard := pick("hard", "--hard", "--har", "--ha")
		if rev := pick("rev", "", "HEAD", "@"); rev != "" {
			return append([]string{"reset"}, order(t, []string{hard}, rev)...), "tree"
		}
		if q := pick("quiet", "-q", "--quiet", ""); q != "" {
			return []string{"reset", hard, q}, "tree"
		}
		return []string{"reset", hard}, "tree"
	case 5: // git clean -f...
		f := pick("clean", "-f", "-fd", "-fdx", "-xfd", "--force", "--forc", "-d -f", "-f -d -x", "-qf")
		return append([]string{"clean"}, strings.Fields(f)...), "untracked"
	case 6: // git stash drop / clear
		return []string{"stash", pick("stash", "drop", "clear", "drop -q", "drop stash@{0}")}, "stash"
	default: // git switch --discard-changes BRANCH
		d := pick("discard", "-f", "--force", "--discard-changes", "--discard-c", "--disc")
		return append([]string{"switch"}, order(t, []string{d}, "other")...), "tree"
	}
}

// discardFormMore draws the forms of discardForm with plumbing, stash
// entries, staged changes and linked work trees.
func discardFormMore(t *rapid.T) (setup string, words []string, what string) {
	pick := func(label string, xs ...string) string { return rapid.SampledFrom(xs).Draw(t, label) }
	switch rapid.IntRange(0, 7).Draw(t, "more") {
	case 0: // git read-tree -u --reset
		return "", strings.Fields("read-tree " + pick("reset", "-u --reset HEAD", "--reset -u HEAD", "--reset -u @", "HEAD --reset -u")), "tree"
	case 1: // git read-tree -mu (after the copy of the repository, s's stat data is stale)
		return "git update-index -q --refresh\n", strings.Fields("read-tree " + pick("merge", "-mu HEAD", "-m -u HEAD", "-um HEAD", "HEAD -mu", "-u -m -v HEAD")), "staged"
	case 2: // git reset --merge
		return "git update-index -q --refresh\n", strings.Fields("reset " + pick("merge", "--merge", "--merg", "--me", "--merge HEAD", "HEAD --merge", "-q --merge")), "staged"
	case 3: // git checkout-index -f of everything
		if rapid.Bool().Draw(t, "stdin") {
			return "git ls-files > list\n", strings.Fields("checkout-index " + pick("force", "-f", "--force", "-fq", "--forc") +
				" --stdin < list"), "tree"
		}
		return "", strings.Fields("checkout-index " + pick("all", "-a -f", "-f -a", "-af", "-fa", "--all --force", "--force -a", "-qaf")), "tree"
	case 4: // the stash's plumbing
		return "", strings.Fields(pick("stash", "update-ref -d refs/stash", "update-ref --no-deref -d refs/stash", "update-ref -m x -d refs/stash",
			"reflog delete stash@{0}", "reflog delete refs/stash@{0}", "reflog expire --expire=now --all",
			"reflog expire --expire=now refs/stash", "reflog expire --expire=all stash")), "stash"
	case 5: // git submodule deinit/update --force (git-submodule.sh takes no abbreviations)
		return "mkdir smsrc && git -C smsrc init -q -b main && echo a > smsrc/a && git -C smsrc add a && " +
				"git -C smsrc -c user.name=t -c user.email=t@t commit -qm a && " +
				"git -c protocol.file.allow=always submodule add -q ./smsrc sm && echo X > sm/a\n",
			strings.Fields("submodule " + pick("submodule", "deinit -f sm", "deinit --force sm", "deinit -f --all",
				"-q deinit -f sm", "update -f", "update --force", "update --force sm", "update --init --force")), "submodule"
	case 6:
		return reflogForm(t)
	default: // git worktree remove --force
		force := pick("force", "-f", "--force", "--forc", "-f -f")
		return "git worktree add -q wt other && echo X > wt/f\n",
			append([]string{"worktree", "remove"}, order(t, strings.Fields(force), "wt")...), "worktree"
	}
}

// reflogForm draws a form that drops the reflog entries of a commit only
// HEAD's reflog names, with the setup that makes one.
func reflogForm(t *rapid.T) (setup string, words []string, what string) {
	return reflogSetup, strings.Fields(rapid.SampledFrom([]string{"reflog expire --expire=now HEAD",
		"reflog expire --expire now HEAD", "reflog expire --expire=all HEAD", "reflog expire --expire-unreachable=now HEAD",
		"reflog expire --expire-unr=all HEAD", "reflog expire HEAD", "reflog expire --all",
		"reflog expire --stale-fix --expire=now --all", "-c gc.reflogExpire=now reflog expire HEAD",
		"-c gc.reflogExpireUnreachable=now reflog expire HEAD", "-c gc.reflogexpire=now reflog expire --all",
		"reflog delete --rewrite HEAD@{1}", "reflog delete --rew HEAD@{1}", "reflog delete HEAD@{1} HEAD@{0}"}).Draw(t, "reflog")), "reflog"
}

// reflogSetup leaves a commit that only HEAD's reflog names, as a commit
// on a detached HEAD left behind does, its entries dated 2000 (so that
// --expire=now and the default 30 days for unreachable entries take them).
const reflogSetup = `export GIT_COMMITTER_DATE=2000-01-01T00:00:00Z
git checkout -q --detach && c=$(git -c user.name=t -c user.email=t@t commit-tree "HEAD^{tree}" -p HEAD -m DANGLING) &&
git update-ref --no-deref -m dangle HEAD "$c" && echo "$c" > .git/dangling && git checkout -q main
unset GIT_COMMITTER_DATE
`

// order puts opts before or after operands ops.
func order(t *rapid.T, opts []string, ops ...string) []string {
	if rapid.Bool().Draw(t, "options last") {
		return append(ops, opts...)
	}
	return append(opts, ops...)
}

// discardSpelling wraps the subcommand's words (after a -c NAME=VALUE the
// form needs) in git's global options, a git alias, variables, shell
// aliases, wrappers and nested shells.
func discardSpelling(t *rapid.T, words []string) string {
	pick := func(label string, xs ...string) string { return rapid.SampledFrom(xs).Draw(t, label) }
	global := pick("global", "", "-C .", "--no-pager", "-c color.ui=never", "--git-dir=.git --work-tree=.",
		`-C "$PWD"`, "-c core.quotepath=off -C .")
	if words[0] == "-c" {
		global = strings.TrimSpace(global + " -c " + words[1])
		words = words[2:]
	}
	pre := "p=.\n"
	if rapid.Bool().Draw(t, "option in a variable") && len(words) > 1 && strings.HasPrefix(words[1], "-") {
		pre += "o=" + shq(words[1]) + "\n"
		words = append([]string{words[0], "$o"}, words[2:]...)
	}
	cmd := "git " + global
	how := pick("alias", "none", "-c", "config")
	if strings.ContainsAny(strings.Join(words, " "), "$<") {
		how = "none" // git does not expand a non-! alias's words
	}
	switch how {
	case "-c":
		cmd += " -c alias.zz=" + shq(strings.Join(words, " ")) + " zz"
	case "config":
		pre += "git config alias.zz " + shq(strings.Join(words, " ")) + "\n"
		cmd += " zz"
	default:
		cmd += " " + strings.Join(words, " ")
	}
	if strings.Contains(cmd, "$o") || strings.Contains(cmd, "$p") {
		pre = strings.ReplaceAll(strings.ReplaceAll(pre, "\no=", "\nexport o="), "p=.", "export p=.")
	}
	wrap := pick("wrapper", "S", "bash -c Q", "sh -c Q", "eval Q", "env S", "command S", "nice S", "timeout 30 S",
		"f() { S; }; f", "{ S; }", "( S )", "shopt -s expand_aliases\nalias g=Q\ng", "echo Q | bash", "true && S",
		"time S", "bash -c Q _ x", "builtin eval Q", "if true; then S; fi", "true | xargs S", "xargs S < /dev/null", "shopt -s expand_aliases\nalias gg='git '\ngg"+
			strings.TrimPrefix(cmd, "git"))
	if strings.Contains(cmd, "<") && strings.Contains(wrap, "xargs") {
		wrap = "S" // the redirection would be xargs'
	}
	if strings.HasPrefix(wrap, "shopt -s expand_aliases\nalias gg=") {
		return pre + wrap
	}
	return pre + wrapMiss(wrap, cmd)
}

// TestGitDiscardGrammar: every generated spelling of git's forms that
// discard uncommitted work really loses work in a real repository (f's
// change, the untracked file or the stash entry), and standard never
// allows one (nor guarded); a control that loses nothing is allowed.
func TestGitDiscardGrammar(t *testing.T) {
	git := testenv.NeedsTool(t, "git")[0]
	bash := testenv.NeedsTool(t, "bash")[0]
	template := discardRepo(t, git)
	standard, err := Preset("standard")
	if err != nil {
		t.Fatal(err)
	}
	guarded, err := Preset("guarded")
	if err != nil {
		t.Fatal(err)
	}
	runIn := func(t testing.TB, script string) (string, string) {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(template)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, bash, "-c", script)
		c.Dir = dir
		c.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, _ := c.CombinedOutput()
		return dir, string(out)
	}
	for _, control := range []string{"git status", "git checkout f.txt 2>/dev/null; git stash list", "git clean -fdx -n",
		"git restore --staged .", "git stash", "git checkout -q other 2>/dev/null; git switch main 2>/dev/null; true",
		"git read-tree HEAD", "git read-tree -m HEAD", "git read-tree --prefix=sub/ -u other", "git read-tree -n -mu HEAD", "git reset --keep HEAD",
		"git reflog show stash", "git reflog expire --dry-run --expire=now --all", "git update-ref -d refs/heads/other",
		"git worktree add -q wt other && echo X > wt/f && git worktree remove wt 2>/dev/null; git worktree list",
		"git checkout-index -a", "git checkout-index -f --temp -a"} {
		dir, out := runIn(t, control)
		for _, what := range []string{"tree", "untracked", "stash"} {
			if control != "git stash" && (lost(t, git, dir, what) || lost(t, git, dir, "staged")) {
				t.Errorf("control %q lost %s: %s", control, what, out)
			}
		}
		if o := Gate(control, standard); o.Decision != Allow {
			t.Errorf("control %q: %s %s", control, o.Decision, o.Message)
		}
	}
	check := func(form func(*rapid.T) (string, []string, string)) func(*rapid.T) {
		return func(rt *rapid.T) {
			setup, words, what := form(rt)
			spelling := discardSpelling(rt, words)
			script := setup + spelling
			dir, out := runIn(t, script)
			if !lost(t, git, dir, what) {
				rt.Fatalf("the spelling loses no %s work (the generator is wrong): %q: %s", what, script, out)
			}
			for _, p := range []*Profile{standard, guarded} {
				if o := Gate(spelling, p); o.Decision == Allow { // the setup alone may ask
					rt.Fatalf("%s allows %q", p.Name, spelling)
				}
			}
		}
	}
	rapid.Check(t, check(discardForm))
	// The reflog forms again: discardForm draws one in twenty.
	rapid.Check(t, check(reflogForm))
}

// TestGitDiscardRule: what the git-discard grammar leaves alone (dry runs,
// named files, unstaging, switching without force: review4's L3 false ask
// on git clean -fdx -n), a profile written as JSON keeps the grammar, and
// Compile refuses a grammar it does not know.
func TestGitDiscardRule(t *testing.T) {
	standard, err := Preset("standard")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd  string
		want Decision
	}{
		{"git clean -fdx -n", Allow}, {"git clean --dry-run -fd", Allow}, {"git clean -fdx", Ask},
		{"git -c clean.requireForce=false clean -d", Ask}, {"git checkout src/app.py", Allow},
		{"git checkout -- a.py b.py", Allow}, {"git restore --staged .", Allow}, {"git restore -SW .", Ask},
		{"git checkout main", Allow}, {"git checkout -b feature", Allow}, {"git switch -c x", Allow},
		{"git stash && git stash pop", Allow}, {"git stash list", Allow}, {"git reset HEAD~1", Allow},
		{"git reset --soft HEAD~1", Allow}, {"git checkout -- $(git ls-files -m)", Ask},
		{"git checkout \"$branch\"", Ask}, {"git $sub -- .", Ask}, {"git checkout-index -f -a", Ask},
		{"git rm -rf --cached .", Allow}, {"git rm -rf .", Ask}, {"echo . | xargs git checkout --", Ask},
		{"cd /w/p && git checkout -- /w/p", Ask}, {"git checkout -- /w", Ask}, {"git checkout -- /w/p/src", Allow},
		{"cat list | xargs git checkout --", Ask}, {"cat list | xargs git", Ask}, {"xargs git stash < f", Ask},
		{"cat list | xargs git add", Allow}, {"echo a.py | xargs git checkout --", Allow},
		// review6: plumbing, exclude-only pathspecs, stash refs, linked work trees
		{"git read-tree -u --reset HEAD", Ask}, {"git read-tree -mu HEAD", Ask}, {"git read-tree --reset -u HEAD", Ask},
		{"git read-tree HEAD", Allow}, {"git read-tree -m HEAD", Allow}, {"git read-tree --prefix=lib/ -u other", Allow},
		{"git read-tree -n -mu HEAD", Allow}, {"git checkout -- ':!x'", Ask}, {"git checkout -- ':^x'", Ask},
		{"git restore :^x", Ask}, {"git restore ':/!x'", Ask}, {"git checkout HEAD ':(exclude)x'", Ask},
		{"git checkout -- a.py ':!x'", Allow}, {"git rm -rf ':!x'", Ask},
		{"git ls-files | git checkout-index -f --stdin", Ask}, {"git checkout-index -a -f", Ask},
		{"git checkout-index -f --temp -a", Allow}, {"git checkout-index --stdin", Allow},
		{"git update-ref -d refs/stash", Ask}, {"git update-ref -d refs/heads/x", Allow}, {"git update-ref refs/heads/x HEAD", Allow},
		{"git reflog delete stash@{0}", Ask}, {"git reflog expire --expire=now --all", Ask}, {"git reflog show stash", Allow},
		// reflogs of any ref: a commit only a reflog names
		{"git -c gc.reflogExpire=now reflog expire HEAD", Ask}, {"git -c gc.reflogExpireUnreachable=now reflog expire main", Ask},
		{"git reflog expire --expire=now HEAD", Ask}, {"git reflog expire --expire-unreachable now refs/heads/main", Ask},
		{"git reflog delete --rewrite HEAD@{1}", Ask}, {"git reflog expire --dry-run --expire=now HEAD", Allow},
		// git 2.50's drop deletes whole reflogs (review7)
		{"git reflog drop --all", Ask}, {"git reflog drop refs/stash", Ask}, {"git reflog drop HEAD", Ask}, {"git reflog list", Allow},
		{"git reflog", Allow}, {"git reflog show HEAD", Allow}, {"git reflog -n 5", Allow}, {"git reflog exists HEAD", Allow},
		{"git reset --merge", Ask}, {"git reset --keep HEAD~1", Allow}, {"git reset --mixed", Allow},
		{"git worktree remove --force w", Ask}, {"git worktree remove -f w", Ask}, {"git worktree remove w", Allow},
		{"git worktree add w", Allow}, {"git worktree prune", Allow},
		{"git submodule deinit -f sm", Ask}, {"git submodule update --force", Ask}, {"git submodule deinit sm", Allow},
		{"git submodule update --init", Allow}, {"git submodule add -f ../x x", Allow},
	} {
		got := Analyze(tc.cmd, Options{Profile: standard, WorkDir: "/w/p"}).Outcome
		if got.Decision != tc.want {
			t.Errorf("%q: %s (%s), want %s", tc.cmd, got.Decision, got.Message, tc.want)
		}
		if tc.want == Ask && got.Rule != "git-discard" || tc.want == Ask && !got.Contained {
			t.Errorf("%q: rule %q contained %v, want git-discard, contained", tc.cmd, got.Rule, got.Contained)
		}
	}
	b, err := json.Marshal(standard)
	if err != nil {
		t.Fatal(err)
	}
	var back Profile
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d, r := back.Evaluate("alias g=git; g checkout -- ."); d != Ask || r == nil || r.Grammar != "git-discard" {
		t.Errorf("standard from JSON: %s %+v", d, r)
	}
	bad := Profile{Rules: []Rule{{Pattern: "^tool:bash:", Decision: Ask, Grammar: "nope"}}}
	if err := bad.Compile(); err == nil {
		t.Error("Compile accepted grammar nope")
	}
	if d, _ := bad.Evaluate("ls"); d != Deny {
		t.Errorf("a profile that does not compile: %s, want deny", d)
	}
}
