package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Roots say where a command may write besides its scratch directory. Only
// Writable is enforced without private namespaces (by Landlock); Protected
// and Pinned need them (they are bind mounts in the command's mount
// namespace), and [Prepare] refuses them without. With a copy-on-write
// layer ([Options.Layer]) Protected and Pinned are not used.
type Roots struct {
	// Writable are directories the command may change below: create,
	// write, rename, remove, and (with private namespaces) change
	// permissions and times, but never set the setuid or setgid bits.
	Writable []string
	// Protected are files and directories below Writable that stay
	// read-only, and can be neither removed nor renamed (EROFS, EBUSY):
	// what a person's tools would later run outside the sandbox, such as a
	// repository's hooks and config.
	Protected []string
	// Pinned are directories below Writable that stay writable but can be
	// neither removed nor renamed (EBUSY), so that what is Protected inside
	// them stays where the tools look for it (a command cannot move .git
	// aside and put a .git of its own in its place).
	Pinned []string

	// missing are Protected paths that did not exist when WorkspaceRoots
	// found them: Prepare creates them empty before protecting them.
	missing []missingPath
}

// missingPath is a path to protect that does not exist yet.
type missingPath struct {
	path string
	dir  bool
}

// create makes the missing protected paths, empty (a directory, or a
// file), where they are still missing.
func (r Roots) create() error {
	for _, m := range r.missing {
		var err error
		if m.dir {
			err = os.MkdirAll(m.path, 0o755)
		} else {
			var f *os.File
			if f, err = os.OpenFile(m.path, os.O_CREATE|os.O_RDONLY, 0o644); err == nil {
				f.Close()
			}
		}
		if err != nil {
			return fmt.Errorf("sandbox: workspace: %w", err)
		}
	}
	return nil
}

// WorkspaceRoots returns the roots of the workspace-write profile for a
// command working in dir: dir writable, and the git repository dir belongs
// to (found as git finds it, walking up from dir) made usable, so that
// git add, commit, branch and stash work, also where the git directory lies
// outside dir (a worktree's, a submodule's, or a repository whose top is
// above dir). Protected are what git would run later outside the sandbox:
// every hooks directory and config file of the repository (the common
// git directory, each worktree's config.worktree, every submodule's git
// directory below modules/, a core.hooksPath directory that exists), and
// the .git files that name git directories (the workspace's own, and those
// of the submodules .gitmodules lists). Every git directory and a
// .git directory are Pinned. A hooks directory or config.worktree file
// that does not exist is created empty by [Prepare] before the command
// starts (git init creates the former; git reads the latter only when
// the config says so), because a missing path cannot be protected and a
// command could create it. WorkspaceRoots itself changes nothing.
//
// Git commands that write the config (git remote add, git config, git
// branch --set-upstream-to) fail in the sandbox. Config includes
// (include.path) are not followed.
//
// With a copy-on-write layer ([Options.Layer]) only Writable is used:
// the layer's roots are the workspace and the git directories outside
// it, Protected and Pinned are ignored (and nothing is created), since
// policy on the layer's change set takes their place, for new
// repositories too.
func WorkspaceRoots(dir string) (Roots, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return Roots{}, fmt.Errorf("sandbox: workspace: %w", err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return Roots{}, fmt.Errorf("sandbox: workspace: %w", err)
	}
	r := Roots{Writable: []string{dir}}
	dotgit, fi := findDotGit(dir)
	if dotgit == "" {
		return r, nil
	}
	g := &gitRoots{seen: map[string]bool{}}
	gitDir := dotgit
	if fi.Mode().IsRegular() {
		// A worktree's or a submodule's checkout: .git names the git dir.
		g.protect(dotgit)
		if gitDir, err = readGitFile(dotgit); err != nil {
			return Roots{}, fmt.Errorf("sandbox: workspace: %w", err)
		}
	} else {
		g.pin(dotgit)
	}
	if err := g.gitDir(gitDir, 0); err != nil {
		return Roots{}, fmt.Errorf("sandbox: workspace: %w", err)
	}
	g.submoduleFiles(filepath.Dir(dotgit), 0)
	r.Writable = append(r.Writable, g.writable...)
	r.Protected, r.Pinned, r.missing = g.protected, g.pinned, g.missing
	return r, nil
}

// findDotGit walks up from dir to the first .git (a directory or a file).
func findDotGit(dir string) (string, fs.FileInfo) {
	for {
		p := filepath.Join(dir, ".git")
		if fi, err := os.Lstat(p); err == nil && (fi.IsDir() || fi.Mode().IsRegular()) {
			return p, fi
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", nil
		}
		dir = parent
	}
}

// readGitFile reads a "gitdir: PATH" file (relative to its directory).
func readGitFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return "", fmt.Errorf("%s: not a gitdir file", path)
	}
	return resolve(filepath.Dir(path), strings.TrimSpace(s))
}

// resolve makes p absolute (relative to base) with its symlinks resolved.
func resolve(base, p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return filepath.EvalSymlinks(p)
}

// maxModuleDepth bounds the nesting of submodules followed.
const maxModuleDepth = 8

type gitRoots struct {
	writable, protected, pinned []string
	missing                     []missingPath
	seen                        map[string]bool
}

func (g *gitRoots) protect(p string) {
	if !slices.Contains(g.protected, p) {
		g.protected = append(g.protected, p)
	}
}

func (g *gitRoots) pin(p string) {
	if !slices.Contains(g.pinned, p) {
		g.pinned = append(g.pinned, p)
	}
}

// gitDir adds a git directory, its common directory, and the submodules
// and worktrees below the common directory.
func (g *gitRoots) gitDir(dir string, depth int) error {
	if g.seen[dir] {
		return nil
	}
	g.seen[dir] = true
	g.writable = append(g.writable, dir)
	g.pin(dir)
	common := dir
	if b, err := os.ReadFile(filepath.Join(dir, "commondir")); err == nil {
		// A worktree's git dir: refs, objects and the config are shared.
		c, err := resolve(dir, strings.TrimSpace(string(b)))
		if err != nil {
			return err
		}
		common = c
		if err := g.worktreeConfig(dir); err != nil {
			return err
		}
		if !g.seen[common] {
			g.seen[common] = true
			g.writable = append(g.writable, common)
			g.pin(common)
		}
	}
	return g.commonDir(common, depth)
}

// commonDir protects a common git directory's hooks and config (and the
// hooks directory its config names), every worktree's config.worktree,
// and recurses into its submodules.
func (g *gitRoots) commonDir(common string, depth int) error {
	hooks := filepath.Join(common, "hooks")
	if err := g.protectOrCreate(hooks, true); err != nil {
		return err
	}
	config := filepath.Join(common, "config")
	if _, err := os.Stat(config); err == nil {
		g.protect(config)
		if hp := hooksPath(config); hp != "" {
			// core.hooksPath, relative paths meaning the top of the
			// working tree, which for a protected config is only known
			// through core.worktree; relative ones are taken from the
			// common dir's parent (the usual .git layout).
			if !filepath.IsAbs(hp) {
				hp = filepath.Join(filepath.Dir(common), hp)
			}
			if p, err := filepath.EvalSymlinks(hp); err == nil {
				g.protect(p)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := g.worktreeConfig(common); err != nil {
		return err
	}
	worktrees, _ := os.ReadDir(filepath.Join(common, "worktrees"))
	for _, w := range worktrees {
		if w.IsDir() {
			wd := filepath.Join(common, "worktrees", w.Name())
			g.pin(wd)
			if err := g.worktreeConfig(wd); err != nil {
				return err
			}
		}
	}
	if depth >= maxModuleDepth {
		return nil
	}
	return g.modules(filepath.Join(common, "modules"), depth)
}

// modules finds the git directories below a modules directory (a
// submodule named a/b lives in modules/a/b) and adds each.
func (g *gitRoots) modules(dir string, depth int) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // no submodules
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(p, "HEAD")); err == nil {
			if err := g.gitDir(p, depth+1); err != nil {
				return err
			}
			continue
		}
		if err := g.modules(p, depth); err != nil { // a/b: go on down
			return err
		}
	}
	return nil
}

// submoduleFiles protects the .git files of the submodules checked out in
// the working tree top (the paths .gitmodules lists), and of theirs.
func (g *gitRoots) submoduleFiles(top string, depth int) {
	if depth >= maxModuleDepth {
		return
	}
	f, err := os.Open(filepath.Join(top, ".gitmodules"))
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "path") {
			continue
		}
		sub := filepath.Join(top, strings.Trim(strings.TrimSpace(v), `"`))
		if !strings.HasPrefix(sub, top+string(filepath.Separator)) {
			continue // a path leaving the tree is not git's
		}
		if fi, err := os.Lstat(filepath.Join(sub, ".git")); err == nil && fi.Mode().IsRegular() {
			g.protect(filepath.Join(sub, ".git"))
			g.submoduleFiles(sub, depth+1)
		}
	}
}

// worktreeConfig protects dir/config.worktree (to be created empty if
// missing).
func (g *gitRoots) worktreeConfig(dir string) error {
	return g.protectOrCreate(filepath.Join(dir, "config.worktree"), false)
}

// protectOrCreate protects p, noting it as missing (to be created by
// Prepare) if it does not exist.
func (g *gitRoots) protectOrCreate(p string, dir bool) error {
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		g.missing = append(g.missing, missingPath{path: p, dir: dir})
	} else if err != nil {
		return err
	}
	g.protect(p)
	return nil
}

// hooksPath returns core.hooksPath from a git config file ("" if unset).
// It reads the plain `[core]` section syntax git writes; quoting and
// includes are not interpreted.
func hooksPath(config string) string {
	f, err := os.Open(config)
	if err != nil {
		return ""
	}
	defer f.Close()
	var inCore bool
	var value string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			inCore = strings.EqualFold(strings.Trim(line, "[] \t"), "core")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if inCore && ok && strings.EqualFold(strings.TrimSpace(k), "hookspath") {
			value = strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	return value
}
