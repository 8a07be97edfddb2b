//go:build linux

package gitpolicy

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bashvisor/bashvisor/internal/layer"
)

// View shows the files around a change set before and after the
// command (*layer.Set implements it).
type View interface {
	// Lstat returns the status of path, not following a final symlink.
	Lstat(path string, after bool) (fs.FileInfo, error)
	// ReadFile returns up to limit bytes of the regular file path.
	ReadFile(path string, after bool, limit int64) ([]byte, error)
	// ReadDir returns the sorted names in the directory path.
	ReadDir(path string, after bool) ([]string, error)
}

// Rule names a policy rule. Each refusal names the rule that refused
// it, and each rule has a test named after it.
type Rule string

// The rules, checked for every change inside a git directory (found by
// content, see the package doc) and, for the first three, for every
// change in a working tree.
const (
	// DotGit: a name that git reads as .git on some file system (.GIT,
	// .git., git~1, HFS+-ignorable code points) other than .git itself.
	DotGit Rule = "git-dotgit"
	// GitFile: a .git that is not a directory (a "gitdir:" file or a
	// symlink) is created, changed or removed: it points git at another
	// git directory.
	GitFile Rule = "git-gitfile"
	// Gitmodules: a .gitmodules that is a symlink, does not parse, or
	// has an entry that runs a program (update = !cmd), reads as an
	// option, uses a transport helper, or leaves the tree (.. or an
	// absolute path).
	Gitmodules Rule = "git-gitmodules"
	// Config: an existing repository's config, config.worktree (or
	// their lock files).
	Config Rule = "git-config"
	// NewConfig: a new repository's config sets a key that git init or
	// git clone do not write, or a value they do not write (an include,
	// core.fsmonitor, core.hooksPath, core.sshCommand, core.pager,
	// core.editor, core.worktree, filter, diff and merge drivers,
	// aliases, ...), or does not parse.
	NewConfig Rule = "git-new-config"
	// Hooks: anything in hooks/ but the *.sample files git never runs.
	Hooks Rule = "git-hooks"
	// Commondir: a commondir file (it moves the config, hooks, objects
	// and refs elsewhere).
	Commondir Rule = "git-commondir"
	// Gitdir: a gitdir file (a worktree's or a submodule's link back).
	Gitdir Rule = "git-gitdir"
	// Modules: anything below modules/ that is not inside a submodule's
	// git directory that existed before (a new submodule).
	Modules Rule = "git-modules"
	// Worktrees: anything below worktrees/ that is not data inside a
	// worktree's admin directory that existed before (a new worktree,
	// or its commondir, gitdir, locked or config.worktree).
	Worktrees Rule = "git-worktrees"
	// Info: info/ (exclude, attributes, sparse-checkout, grafts, ...);
	// a new repository may have info/exclude with comments only (the
	// template's).
	Info Rule = "git-info"
	// Alternates: objects/info/alternates or http-alternates.
	Alternates Rule = "git-alternates"
	// Symlink: a symlink inside a git directory.
	Symlink Rule = "git-symlink"
	// RebaseExec: an exec line in a rebase or sequencer todo list, or a
	// merge strategy that is not one of git's.
	RebaseExec Rule = "git-rebase-exec"
	// Structure: an existing repository's git directory, HEAD, objects/
	// or refs/ is removed or replaced.
	Structure Rule = "git-structure"
	// Unknown: anything else in a git directory: git does not write it
	// (branches/ and remotes/ hold remote configuration).
	Unknown Rule = "git-unknown"
)

// advice is what the model can do about each rule.
var advice = map[Rule]string{
	DotGit:     "git treats the name as .git on other file systems; use another name",
	GitFile:    "a .git file or symlink points git at another directory; set up worktrees and submodules outside the sandbox",
	Gitmodules: "fix the .gitmodules entry, or ask the user to add the submodule",
	Config:     "git's configuration cannot change from the sandbox; pass settings for one command with git -c key=value (identity: GIT_AUTHOR_NAME, GIT_AUTHOR_EMAIL), or ask the user",
	NewConfig:  "a new repository keeps only the config git init and git clone write; pass other settings with git -c key=value",
	Hooks:      "hooks are programs git runs later outside the sandbox; ask the user to install them",
	Commondir:  "it would move the repository's config and hooks elsewhere; set up worktrees outside the sandbox",
	Gitdir:     "it links a worktree or submodule to its git directory; set them up outside the sandbox",
	Modules:    "submodules are cloned outside the sandbox (git submodule update --init)",
	Worktrees:  "linked worktrees are set up outside the sandbox (git worktree add)",
	Info:       "info/ changes what git ignores and reads; use .gitignore or ask the user",
	Alternates: "alternates make git read objects from another directory; clone without --shared or --reference",
	Symlink:    "git makes no symlinks in its directory",
	RebaseExec: "exec lines run commands when the rebase goes on outside the sandbox; run the commands yourself",
	Structure:  "removing a repository or its HEAD, objects or refs is not applied; ask the user",
	Unknown:    "git does not write this in its directory",
}

// Refusal is one change that policy does not let through.
type Refusal struct {
	// Path is the refused change's path ([layer.Change.Path]).
	Path string
	// Rule is the rule that refused it.
	Rule Rule
	// Reason says what is wrong, without the path ("sets
	// core.fsmonitor: it is not among the keys git init and git clone
	// write").
	Reason string
}

// Paths returns the refused paths, for [layer.Set.Apply].
func Paths(refusals []Refusal) []string {
	out := make([]string, len(refusals))
	for i, r := range refusals {
		out[i] = r.Path
	}
	return out
}

// maxLinePaths bounds the paths one line of Lines names.
const maxLinePaths = 3

// Lines renders refusals as the lines the model reads, one per rule and
// reason (paths relative to base when below it, at most three named):
//
//	refused .git/config (git-config): a repository's configuration; git's configuration cannot change …
func Lines(refusals []Refusal, base string) []string {
	type group struct {
		r     Refusal
		paths []string
	}
	var groups []*group
	for _, r := range refusals {
		i := slices.IndexFunc(groups, func(g *group) bool { return g.r.Rule == r.Rule && g.r.Reason == r.Reason })
		if i < 0 {
			groups = append(groups, &group{r: r})
			i = len(groups) - 1
		}
		groups[i].paths = append(groups[i].paths, layer.Rel(base, r.Path))
	}
	out := make([]string, len(groups))
	for i, g := range groups {
		names := g.paths
		more := ""
		if len(names) > maxLinePaths {
			more = fmt.Sprintf(" and %d more", len(names)-maxLinePaths)
			names = names[:maxLinePaths]
		}
		out[i] = fmt.Sprintf("refused %s%s (%s): %s; %s", strings.Join(names, ", "), more, g.r.Rule, g.r.Reason, advice[g.r.Rule])
	}
	return out
}

// Check judges every change of a command below roots (the layer's
// roots) and returns the refused ones, in the order of changes.
func Check(v View, roots []string, changes []layer.Change) []Refusal {
	k := &checker{v: v, roots: roots, gitDirs: map[string][2]bool{}, valid: map[string]verdict{}}
	var out []Refusal
	for _, c := range changes {
		if vd := k.judge(c); vd.rule != "" {
			out = append(out, Refusal{Path: c.Path, Rule: vd.rule, Reason: vd.reason})
		}
	}
	return out
}

// verdict is a rule and a reason, or none (allowed).
type verdict struct {
	rule   Rule
	reason string
}

var allowed verdict

func refuse(r Rule, reason string) verdict { return verdict{rule: r, reason: reason} }

type checker struct {
	v       View
	roots   []string
	gitDirs map[string][2]bool // is a git directory before, after
	valid   map[string]verdict // new git directories checked whole
}

// gitDir is an enclosing git directory of a change.
type gitDir struct {
	path    string
	existed bool // a git directory before the command
}

// judge decides one change: first by the innermost git directory
// around it that existed before (which also judges where new git
// directories inside it sit: modules/, worktrees/), then by each new
// git directory around it, checked whole, outermost first, and by the
// innermost one's rules; a change in no existing git directory also by
// the working-tree rules.
func (k *checker) judge(c layer.Change) verdict {
	root := k.rootOf(c.Path)
	for _, part := range strings.Split(strings.TrimPrefix(c.Path, root), "/") {
		if part != ".git" && isDotGit(part) {
			return refuse(DotGit, "a name git reads as .git")
		}
	}
	// Only a directory can be a git directory: a changed file starts
	// the search at its parent.
	from := c.Path
	if !c.Mode.IsDir() && c.Kind != layer.TypeChanged {
		from = filepath.Dir(c.Path)
	}
	chain := k.chain(from, k.rootOf(c.Path))
	var fresh []gitDir // new git directories inside the existing one, outermost first
	for _, g := range chain {
		if !g.existed {
			fresh = append([]gitDir{g}, fresh...)
			continue
		}
		r := strings.TrimPrefix(strings.TrimPrefix(c.Path, g.path), "/")
		if r == "" {
			if c.Kind == layer.Deleted || (c.Kind == layer.TypeChanged && !c.Mode.IsDir()) {
				return refuse(Structure, "a repository's git directory")
			}
			return allowed
		}
		if vd := k.gitPath(g, r, c.Kind, c.Mode); vd.rule != "" {
			return vd
		}
		return k.fresh(fresh, c)
	}
	if vd := k.fresh(fresh, c); vd.rule != "" {
		return vd
	}
	return k.worktree(c)
}

// fresh judges a change inside the new git directories gs (outermost
// first): each must pass as a whole, and the change by the innermost
// one's rules.
func (k *checker) fresh(gs []gitDir, c layer.Change) verdict {
	for _, g := range gs {
		if vd := k.validateNew(g.path); vd.rule != "" {
			return vd
		}
	}
	if len(gs) == 0 {
		return allowed
	}
	g := gs[len(gs)-1]
	if r := strings.TrimPrefix(strings.TrimPrefix(c.Path, g.path), "/"); r != "" {
		return k.gitPath(g, r, c.Kind, c.Mode)
	}
	return allowed
}

// rootOf returns the root p is at or below ("" if none).
func (k *checker) rootOf(p string) string {
	for _, r := range k.roots {
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return r
		}
	}
	return ""
}

// chain returns the git directories at or above p (up to root),
// innermost first.
func (k *checker) chain(p, root string) []gitDir {
	if root == "" || (p != root && !strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")) {
		return nil
	}
	var out []gitDir
	for d := p; ; d = filepath.Dir(d) {
		if g := k.isGitDir(d); g[0] || g[1] {
			out = append(out, gitDir{path: d, existed: g[0]})
		}
		if d == root || len(d) <= len(root) {
			return out
		}
	}
}

// isGitDir reports whether d is a git directory before and after the
// command: a directory named .git (or a name git reads as .git), or
// one that git's discovery would take for a git directory (HEAD, and
// commondir or objects and refs; an over-approximation of git's
// is_git_directory, which also checks what HEAD holds).
func (k *checker) isGitDir(d string) [2]bool {
	if g, ok := k.gitDirs[d]; ok {
		return g
	}
	var g [2]bool
	for i, after := range []bool{false, true} {
		fi, err := k.v.Lstat(d, after)
		if err != nil || !fi.IsDir() {
			continue
		}
		if isDotGit(filepath.Base(d)) {
			g[i] = true
			continue
		}
		if !k.exists(d+"/HEAD", after) {
			continue
		}
		g[i] = k.exists(d+"/commondir", after) || (k.exists(d+"/objects", after) && k.exists(d+"/refs", after))
	}
	k.gitDirs[d] = g
	return g
}

func (k *checker) exists(p string, after bool) bool {
	_, err := k.v.Lstat(p, after)
	return err == nil
}

// maxNewRepoEntries bounds the entries of a new git directory that are
// checked; a larger one is refused.
const maxNewRepoEntries = 200_000

// validateNew checks a new git directory whole, as it is after the
// command (not only what the command changed: it may have been filled
// by earlier commands while it was not yet a git directory).
func (k *checker) validateNew(g string) verdict {
	if vd, ok := k.valid[g]; ok {
		return vd
	}
	vd := allowed
	n := 0
	var walk func(dir, r string) bool
	walk = func(dir, r string) bool {
		names, err := k.v.ReadDir(dir, true)
		if err != nil {
			return true
		}
		for _, name := range names {
			p, cr := dir+"/"+name, strings.TrimPrefix(r+"/"+name, "/")
			if n++; n > maxNewRepoEntries {
				vd = refuse(Unknown, "a new repository too large to check")
				return false
			}
			fi, err := k.v.Lstat(p, true)
			if err != nil {
				continue
			}
			if sub := k.isGitDir(p); sub[1] && !sub[0] {
				if v := k.validateNew(p); v.rule != "" {
					vd = v
					return false
				}
			}
			if v := k.gitPath(gitDir{path: g}, cr, layer.Added, fi.Mode()); v.rule != "" {
				vd = refuse(v.rule, "the new repository "+filepath.Base(g)+" has "+cr+": "+v.reason)
				return false
			}
			if fi.IsDir() && !walk(p, cr) {
				return false
			}
		}
		return true
	}
	walk(g, "")
	k.valid[g] = vd
	return vd
}

// dataFiles are the files at the top of a git directory that hold only
// git's data (states of operations, messages, the index).
var dataFiles = []string{
	"HEAD", "ORIG_HEAD", "FETCH_HEAD", "MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "MERGE_RR", "MERGE_AUTOSTASH",
	"CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD", "AUTO_MERGE", "BISECT_HEAD", "BISECT_LOG", "BISECT_TERMS",
	"BISECT_NAMES", "BISECT_START", "BISECT_EXPECTED_REV", "BISECT_ANCESTORS_OK", "BISECT_FIRST_PARENT",
	"COMMIT_EDITMSG", "SQUASH_MSG", "TAG_EDITMSG", "NOTES_EDITMSG", "NOTES_MERGE_PARTIAL", "NOTES_MERGE_REF",
	"index", "packed-refs", "shallow", "description", "gc.pid", "gc.log",
}

// dataFile reports whether name, at the top of a git directory, is one
// of git's data files.
func dataFile(name string) bool {
	if slices.Contains(dataFiles, name) {
		return true
	}
	for _, p := range []string{"index.", "sharedindex.", "next-index-"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// entry is a path inside a git directory being judged.
type entry struct {
	g     gitDir
	r     string   // relative, slash-separated
	parts []string // r's components
	name  string   // the last one, without a .lock suffix
	top   string   // the first one (name for a top-level entry)
	kind  layer.Kind
	mode  fs.FileMode // after the change (before it for Deleted)
	dir   bool        // a directory after the change
	path  string      // absolute
}

// gitPath judges the path r (relative, slash-separated) inside the git
// directory g, whose state after the change has mode (kind Deleted:
// mode before).
func (k *checker) gitPath(g gitDir, r string, kind layer.Kind, mode fs.FileMode) verdict {
	e := entry{g: g, r: r, parts: strings.Split(r, "/"), kind: kind, mode: mode, path: g.path + "/" + r}
	e.name = strings.TrimSuffix(e.parts[len(e.parts)-1], ".lock")
	e.top = e.parts[0]
	if len(e.parts) == 1 {
		e.top = e.name
	}
	e.dir = mode.IsDir() && kind != layer.Deleted
	switch {
	case kind != layer.Deleted && mode&fs.ModeSymlink != 0:
		return refuse(Symlink, "a symlink in a git directory")
	case kind != layer.Deleted && !mode.IsDir() && !mode.IsRegular():
		return refuse(Unknown, "a special file in a git directory")
	}
	if rule, ok := topRules[e.top]; ok {
		return rule(k, e)
	}
	return topFile(e)
}

// topRules judge the entries of a git directory by their first
// component.
var topRules = map[string]func(*checker, entry) verdict{
	"config":          (*checker).configEntry,
	"config.worktree": (*checker).configEntry,
	"hooks":           func(_ *checker, e entry) verdict { return hooksEntry(e) },
	"commondir":       func(*checker, entry) verdict { return refuse(Commondir, "a commondir file") },
	"gitdir":          func(*checker, entry) verdict { return refuse(Gitdir, "a gitdir file") },
	"modules":         func(*checker, entry) verdict { return refuse(Modules, "a new submodule's git directory") },
	"worktrees":       func(*checker, entry) verdict { return refuse(Worktrees, "a linked worktree's admin files") },
	"locked":          func(*checker, entry) verdict { return refuse(Worktrees, "a linked worktree's admin files") },
	"info":            (*checker).infoEntry,
	"objects":         func(_ *checker, e entry) verdict { return objectsEntry(e) },
	"refs":            func(_ *checker, e entry) verdict { return structural(e, "a repository's refs directory") },
	"reftable":        func(_ *checker, e entry) verdict { return structural(e, "a repository's reftable directory") },
	"logs":            func(*checker, entry) verdict { return allowed },
	"rebase-merge":    (*checker).rebaseState,
	"rebase-apply":    (*checker).rebaseState,
	"sequencer":       (*checker).rebaseState,
	"branches": func(_ *checker, e entry) verdict {
		if !e.g.existed && len(e.parts) == 1 && e.dir {
			return allowed // the template's empty directory
		}
		return refuse(Unknown, "branches/ (remote configuration)")
	},
	"remotes": func(*checker, entry) verdict { return refuse(Unknown, "remotes/ (remote configuration)") },
}

func (k *checker) configEntry(e entry) verdict {
	switch {
	case len(e.parts) > 1:
		return refuse(Unknown, "a file git does not write")
	case !e.g.existed && e.r == "config" && e.mode.IsRegular():
		return k.newConfig(e.path)
	case e.g.existed && e.r == "config" && k.sameContent(e.path):
		return allowed // rewritten as it was (git branch -d does that)
	}
	return refuse(Config, "a repository's configuration")
}

func hooksEntry(e entry) verdict {
	switch {
	case len(e.parts) == 1 && e.dir:
		return allowed
	case len(e.parts) == 2 && strings.HasSuffix(e.name, ".sample") && (e.kind == layer.Deleted || e.mode.IsRegular()):
		return allowed // git never runs a *.sample hook
	}
	return refuse(Hooks, "a hook (a program git runs)")
}

func (k *checker) infoEntry(e entry) verdict {
	newRepo := !e.g.existed
	switch {
	case e.r == "info/refs" && (e.kind == layer.Deleted || e.mode.IsRegular()):
		return allowed // refs for dumb HTTP, which git repack writes
	case newRepo && len(e.parts) == 1 && e.dir:
		return allowed
	case newRepo && e.r == "info/exclude" && e.mode.IsRegular():
		if k.commentsOnly(e.path) {
			return allowed
		}
		return refuse(Info, "info/exclude of a new repository holds patterns")
	}
	return refuse(Info, "info/ (what git ignores and reads)")
}

func objectsEntry(e entry) verdict {
	switch strings.TrimSuffix(e.r, ".lock") {
	case "objects/info/alternates", "objects/info/http-alternates":
		return refuse(Alternates, "an alternates file")
	}
	return structural(e, "a repository's objects directory")
}

// structural refuses removing or replacing one of an existing
// repository's top directories (objects, refs).
func structural(e entry, what string) verdict {
	if len(e.parts) == 1 && e.g.existed && !e.dir {
		return refuse(Structure, what)
	}
	return allowed
}

// topFile judges a file at the top of a git directory that no rule of
// topRules covers.
func topFile(e entry) verdict {
	if len(e.parts) != 1 {
		return refuse(Unknown, "a file git does not write")
	}
	if dataFile(e.name) {
		if e.name == "HEAD" && e.g.existed && (e.kind == layer.Deleted || !e.mode.IsRegular()) {
			return refuse(Structure, "a repository's HEAD")
		}
		return allowed
	}
	if strings.HasSuffix(e.name, "_HEAD") && strings.ToUpper(e.name) == e.name {
		return allowed // another pseudo-ref
	}
	return refuse(Unknown, "a file git does not write")
}

// maxCheckedFile bounds what is read of a file to check its content; a
// larger one is refused.
const maxCheckedFile = 1 << 20

// read returns the content of p after the command, or why it cannot be
// checked.
func (k *checker) read(p string) ([]byte, string) {
	b, err := k.v.ReadFile(p, true, maxCheckedFile+1)
	switch {
	case err != nil:
		return nil, "unreadable: " + err.Error()
	case len(b) > maxCheckedFile:
		return nil, "larger than 1 MiB"
	}
	return b, ""
}

// newConfig checks a new repository's config file.
func (k *checker) newConfig(p string) verdict {
	b, why := k.read(p)
	if why != "" {
		return refuse(NewConfig, "config "+why)
	}
	entries, err := parseConfig(b)
	if err != nil {
		return refuse(NewConfig, "config that does not parse: "+err.Error())
	}
	for _, e := range entries {
		if why := safeKey(e); why != "" {
			return refuse(NewConfig, "sets "+e.name()+": "+why)
		}
	}
	return allowed
}

// sameContent reports whether the regular file p holds the same bytes
// before and after the command.
func (k *checker) sameContent(p string) bool {
	b, why := k.read(p)
	if why != "" {
		return false
	}
	a, err := k.v.ReadFile(p, false, maxCheckedFile+1)
	return err == nil && bytes.Equal(a, b)
}

// commentsOnly reports whether the file p holds only comments and blank
// lines.
func (k *checker) commentsOnly(p string) bool {
	b, why := k.read(p)
	if why != "" {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return sc.Err() == nil
}

// strategies are git's merge strategies (a rebase's state may name
// one; git runs git-merge-NAME for any other name).
var strategies = []string{"ort", "recursive", "resolve", "octopus", "ours", "subtree"}

// rebaseState judges a file of a rebase's, am's or sequencer's state.
func (k *checker) rebaseState(e entry) verdict {
	if !e.mode.IsRegular() || len(e.parts) != 2 {
		return allowed
	}
	switch e.name {
	case "git-rebase-todo", "git-rebase-todo.backup", "todo", "done":
		b, why := k.read(e.path)
		if why != "" {
			return refuse(RebaseExec, "a todo list "+why)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, maxCheckedFile)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) > 0 && (f[0] == "exec" || f[0] == "x") {
				return refuse(RebaseExec, "an exec line in a todo list")
			}
		}
		if sc.Err() != nil {
			return refuse(RebaseExec, "a todo list that does not read")
		}
	case "strategy":
		b, why := k.read(e.path)
		if why != "" || !slices.Contains(strategies, strings.TrimSpace(string(b))) {
			return refuse(RebaseExec, "a merge strategy that is not git's")
		}
	}
	return allowed
}

// worktree judges a change outside every git directory: .git names and
// .gitmodules.
func (k *checker) worktree(c layer.Change) verdict {
	name := filepath.Base(c.Path)
	switch {
	case name == ".git":
		before, berr := k.v.Lstat(c.Path, false)
		after, aerr := k.v.Lstat(c.Path, true)
		if (berr == nil && !before.IsDir()) || (aerr == nil && !after.IsDir()) {
			return refuse(GitFile, "a .git file or symlink")
		}
	case isDotGitmodules(name) && c.Kind != layer.Deleted:
		return k.gitmodules(c.Path)
	}
	if c.Kind == layer.Deleted || c.Kind == layer.TypeChanged {
		return k.removedRepos(c.Path)
	}
	return allowed
}

// maxRemovedEntries bounds the entries of a removed directory searched
// for repositories; a larger one is refused.
const maxRemovedEntries = 1_000_000

// removedRepos refuses removing (or replacing) a directory that holds a
// repository's git directory.
func (k *checker) removedRepos(p string) verdict {
	fi, err := k.v.Lstat(p, false)
	if err != nil || !fi.IsDir() {
		return allowed
	}
	n := 0
	vd := allowed
	var walk func(dir string) bool
	walk = func(dir string) bool {
		names, err := k.v.ReadDir(dir, false)
		if err != nil {
			return true
		}
		for _, name := range names {
			child := dir + "/" + name
			if n++; n > maxRemovedEntries {
				vd = refuse(Structure, "a directory too large to check for repositories")
				return false
			}
			fi, err := k.v.Lstat(child, false)
			if err != nil || !fi.IsDir() {
				continue
			}
			if k.isGitDir(child)[0] {
				vd = refuse(Structure, "a directory that holds a repository ("+layer.Rel(p, child)+")")
				return false
			}
			if !walk(child) {
				return false
			}
		}
		return true
	}
	walk(p)
	return vd
}

// gitmodules checks a .gitmodules file after the command.
func (k *checker) gitmodules(p string) verdict {
	fi, err := k.v.Lstat(p, true)
	if err != nil {
		return allowed
	}
	if !fi.Mode().IsRegular() {
		return refuse(Gitmodules, ".gitmodules that is not a regular file")
	}
	b, why := k.read(p)
	if why != "" {
		return refuse(Gitmodules, ".gitmodules "+why)
	}
	entries, err := parseConfig(b)
	if err != nil {
		return refuse(Gitmodules, ".gitmodules that does not parse: "+err.Error())
	}
	for _, e := range entries {
		if why := submoduleEntry(e); why != "" {
			return refuse(Gitmodules, e.name()+": "+why)
		}
	}
	return allowed
}

// submoduleEntry checks one .gitmodules variable.
func submoduleEntry(e configEntry) string {
	if e.Section != "submodule" {
		return ""
	}
	if bad := badSubmodulePath(e.Sub); bad != "" {
		return "the submodule's name " + bad
	}
	switch e.Key {
	case "update":
		if strings.HasPrefix(strings.TrimSpace(e.Value), "!") {
			return "update = !command runs a program"
		}
	case "url":
		return safeURL(e.Value)
	case "path":
		if bad := badSubmodulePath(e.Value); bad != "" {
			return "the path " + bad
		}
	}
	return ""
}

// badSubmodulePath says what is wrong with a submodule's name or path
// (it leaves the tree, reads as an option, or passes through .git).
func badSubmodulePath(p string) string {
	switch {
	case p == "":
		return "is empty"
	case strings.HasPrefix(p, "-"):
		return "starts with -"
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, "\\"):
		return "is absolute"
	}
	for _, part := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == ".." {
			return "leaves the tree (..)"
		}
		if isDotGit(part) {
			return "passes through .git"
		}
	}
	return ""
}
