//go:build linux

package gitpolicy

import (
	"fmt"
	"io"
	"io/fs"
	"os"
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
	// Open opens the regular file path for reading (packs are read
	// through it, whatever their size); the caller closes it.
	Open(path string, after bool) (io.ReadCloser, error)
	// ReadDir returns the sorted names in the directory path.
	ReadDir(path string, after bool) ([]string, error)
	// Readlink returns the target of the symlink path.
	Readlink(path string, after bool) (string, error)
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
	// Config: a change of an existing repository's config or
	// config.worktree, or of a file its effective configuration
	// includes or names as attributes, that sets a key outside the
	// keys that run nothing, does not parse or removes the file; a
	// .gitattributes in a working tree whose configuration defines
	// drivers (programs the attributes select); a file that a
	// program-valued key (core.fsmonitor, core.pager, core.editor,
	// core.sshCommand, diff.external, a shell alias, a driver, ...) of
	// the user's or a repository's configuration names by a path
	// (relative: below the working tree, where git runs it).
	Config Rule = "git-config"
	// NewConfig: a new repository's config sets a key outside the keys
	// that run nothing, or a value they do not take (an include,
	// core.fsmonitor, core.hooksPath, core.sshCommand, core.pager,
	// core.editor, core.worktree, filter, diff and merge drivers,
	// aliases, ...), or does not parse.
	NewConfig Rule = "git-new-config"
	// Hooks: anything in hooks/ but the *.sample files git never runs,
	// and anything in a directory core.hooksPath names.
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
	// RebaseExec: a file of a rebase's, am's or the sequencer's state
	// that git does not write there, or whose content is not git's own:
	// an exec line or another command in a todo list, a merge strategy
	// or strategy option that is not git's (or names a path), an opts
	// key git does not write, signing (gpg).
	RebaseExec Rule = "git-rebase-exec"
	// Index: an index (or a split or shared index) that does not parse,
	// or has an entry git must not write (verify_path: absolute, .. or
	// .git in any spelling, NTFS and HFS+ included), or a gitlink to a
	// repository that is new.
	Index Rule = "git-index"
	// Ref: a ref, HEAD or another state file whose name or content is
	// not git's grammar (an object id, "ref: refs/...", packed-refs
	// and reflog lines).
	Ref Rule = "git-ref"
	// Object: a loose object whose content does not hash to its name, a
	// pack and index whose checksums do not verify, or another file in
	// objects/ git does not write.
	Object Rule = "git-object"
	// Structure: an existing repository's git directory, HEAD, objects/
	// or refs/ is removed or replaced.
	Structure Rule = "git-structure"
	// Unknown: anything else in a git directory: git does not write it
	// (branches/ and remotes/ hold remote configuration).
	Unknown Rule = "git-unknown"
	// Walk: a change outside the git directories that existed before,
	// below a root whose walk for repositories did not finish (more
	// than maxWalkDirs directories, or one it could not read): a
	// repository it did not find may name the file as code (a hook, a
	// program), so the change waits for a person's review.
	Walk Rule = "git-walk"
)

// advice is what the model can do about each rule.
var advice = map[Rule]string{
	DotGit:     "git treats the name as .git on other file systems; use another name",
	GitFile:    "a .git file or symlink points git at another directory; set up worktrees and submodules outside the sandbox",
	Gitmodules: "fix the .gitmodules entry, or ask the user to add the submodule",
	Config:     "only settings that run nothing (user.*, remote.*.url, branch.*, ...) can change from the sandbox; pass others for one command with git -c key=value, or ask the user",
	NewConfig:  "a new repository keeps only settings that run nothing; pass others with git -c key=value",
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
	Walk:       "the repositories of a workspace this large or partly unreadable cannot all be found; ask the user to review the change",
	Index:      "git would write files outside the working tree or into .git from this index; rebuild it with git read-tree or git reset",
	Ref:        "write refs with git update-ref, git branch or git tag",
	Object:     "write objects with git itself (git hash-object -w, git commit, git fetch)",
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
// roots) and returns the refused ones, in the order of changes. It
// judges the tree that apply will produce: once some changes are
// refused, everything is judged again on the tree with those left out
// (a refused deletion keeps what it would have removed), until no more
// are refused.
//
// The user's git is the engine's: its configuration outside the
// repositories is found with the engine's environment (see CheckEnv).
func Check(v View, roots []string, changes []layer.Change) []Refusal {
	return CheckEnv(v, os.Environ(), roots, changes)
}

// CheckEnv is Check for a user whose git runs with the environment env:
// the system and global configuration git reads with it (HOME,
// XDG_CONFIG_HOME, GIT_CONFIG_GLOBAL, GIT_CONFIG_SYSTEM,
// GIT_CONFIG_NOSYSTEM, GIT_CONFIG_COUNT, GIT_CONFIG_PARAMETERS) is part
// of every repository's effective configuration.
func CheckEnv(v View, env []string, roots []string, changes []layer.Change) []Refusal {
	user := userConfigOf(env)
	v = wide{View: v, roots: roots}
	refused := map[string]Refusal{}
	index := make(map[string]int, len(changes))
	for i, c := range changes {
		index[c.Path] = i
	}
	var view View = v
	var below [][]repoCand // the repositories below each root that holds changes
	missed := map[string]string{}
	for _, root := range roots {
		if (&checker{roots: roots, changes: changes}).holdsChanges(root) {
			cands, why := foundBelow(root)
			below = append(below, cands)
			if why != "" {
				missed[root] = why
			}
		}
	}
	for {
		k := newChecker(view, roots, changes, index)
		k.user, k.missed = user, missed
		k.global()
		for _, c := range changes {
			if root := k.rootOf(c.Path); root != "" {
				k.repositories(dirName(c.Path), root)
			}
		}
		for _, cands := range below {
			k.allRepositories(cands)
		}
		p, _ := view.(*projected)
		more := false
		for _, c := range changes {
			if _, ok := refused[c.Path]; ok || (p != nil && p.covered(c.Path)) {
				continue
			}
			if vd := k.judge(c); vd.rule != "" {
				refused[c.Path] = Refusal{Path: c.Path, Rule: vd.rule, Reason: vd.reason}
				more = true
			}
		}
		if !more {
			break
		}
		view = project(v, changes, refused)
	}
	var out []Refusal
	for _, c := range changes {
		if r, ok := refused[c.Path]; ok {
			out = append(out, r)
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
	v         View
	roots     []string
	gitDirs   map[string][2]bool // is a git directory before, after
	valid     map[string]verdict // new git directories checked whole
	hashSizes map[string]int     // object id sizes by git directory
	packs     map[string]string  // packs checked, by path without extension
	seenDirs  map[string]bool    // directories searched for repositories
	repos     map[string]bool    // git directories found
	code      *code              // what their configurations name as code
	dirs      map[dirView]bool   // is a directory before, after
	changes   []layer.Change
	index     map[string]int // changes by path
	near      map[string]*gitDirNode
	user      *userConfig       // the user's configuration outside the repositories
	resolved  *code             // code's hooks and programs resolved through symlinks (codeResolved)
	resolvedN [3]int            // how many of code's hooks, programs and configs resolved has
	missed    map[string]string // why the walk of a root did not find every repository, by root
}

func newChecker(v View, roots []string, changes []layer.Change, index map[string]int) *checker {
	return &checker{v: v, roots: roots, changes: changes, index: index, gitDirs: map[string][2]bool{}, valid: map[string]verdict{},
		hashSizes: map[string]int{}, packs: map[string]string{}, seenDirs: map[string]bool{}, repos: map[string]bool{},
		code: &code{configs: map[string]bool{}}, dirs: map[dirView]bool{}, near: map[string]*gitDirNode{}}
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
	// Each entry the command named is a change of its own: its last
	// component is the one to check.
	if name := baseName(c.Path); name != ".git" && isDotGit(name) {
		return refuse(DotGit, "a name git reads as .git")
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
			if c.Kind == layer.Deleted && k.isAdmin(g.path) {
				return allowed // git worktree prune and remove
			}
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
	if vd := k.codeFile(c); vd.rule != "" {
		return vd
	}
	if vd := k.worktree(c); vd.rule != "" {
		return vd
	}
	if why := k.missed[k.rootOf(c.Path)]; why != "" {
		return refuse(Walk, why)
	}
	return allowed
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
	for n := k.nearest(p, root); n != nil; n = n.up {
		out = append(out, n.g)
	}
	return out
}

// gitDirNode is a git directory and the next one above it.
type gitDirNode struct {
	g  gitDir
	up *gitDirNode
}

// nearest returns the innermost git directory at or above d (up to
// root), each directory looked at once per Check.
func (k *checker) nearest(d, root string) *gitDirNode {
	if n, ok := k.near[d]; ok {
		return n
	}
	var up *gitDirNode
	if d != root && len(d) > len(root) {
		up = k.nearest(filepath.Dir(d), root)
	}
	n := up
	if g := k.isGitDir(d); g[0] || g[1] {
		n = &gitDirNode{g: gitDir{path: d, existed: g[0]}, up: up}
	}
	k.near[d] = n
	return n
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
		switch {
		case !k.isDir(d, after):
		case isDotGit(filepath.Base(d)):
			g[i] = true
		case k.exists(d+"/HEAD", after):
			g[i] = k.exists(d+"/commondir", after) || (k.exists(d+"/objects", after) && k.exists(d+"/refs", after))
		}
	}
	k.gitDirs[d] = g
	return g
}

// isDir reports whether d is a directory before or after the command
// (once per directory: not when its parent is not one).
func (k *checker) isDir(d string, after bool) bool {
	key := dirView{d, after}
	if v, ok := k.dirs[key]; ok {
		return v
	}
	v := false
	if c, ok := k.listed(d); ok {
		v = after && c != nil && c.Kind != layer.Deleted && c.Mode.IsDir()
	} else if p := dirName(d); p == d || k.rootOf(d) == d || k.rootOf(p) == "" || k.isDir(p, after) {
		fi, err := k.v.Lstat(d, after)
		v = err == nil && fi.IsDir()
	}
	k.dirs[key] = v
	return v
}

type dirView struct {
	path  string
	after bool
}

func (k *checker) exists(p string, after bool) bool {
	if c, ok := k.listed(p); ok {
		return after && c != nil && c.Kind != layer.Deleted
	}
	_, err := k.v.Lstat(p, after)
	return err == nil
}

// listed returns the change at p when p lies in a directory the
// command added: everything there is a change, so the change list says
// what exists (without a lookup in the layer, which costs the depth of
// the path).
// It returns nil when p is not there.
func (k *checker) listed(p string) (*layer.Change, bool) {
	d := dirName(p)
	if i, ok := k.index[d]; !ok || k.changes[i].Kind != layer.Added || !k.changes[i].Mode.IsDir() || k.asBefore(d) {
		return nil, false
	}
	if i, ok := k.index[p]; ok {
		return &k.changes[i], true
	}
	return nil, true
}

// asBefore reports whether the view shows p as before the command (a
// refused change).
func (k *checker) asBefore(p string) bool {
	pv, ok := k.v.(*projected)
	return ok && pv.asBefore(p)
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
