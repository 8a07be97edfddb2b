//go:build linux

package transact

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Roots returns the directories a workspace-write command working in dir
// may change: dir, and the git directory of the repository dir belongs
// to (found as git finds it, walking up from dir) with its common
// directory, where they lie outside dir (a linked worktree's, a
// submodule's, a repository whose top is above dir). Symlinks are
// resolved. Unlike sandbox.WorkspaceRoots it changes nothing: policy on
// the change set replaces protecting paths.
func Roots(dir string) ([]string, error) {
	dir, err := filepath.Abs(dir)
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("transact: workspace: %w", err)
	}
	roots := []string{dir}
	gitDir := findGitDir(dir)
	if gitDir == "" {
		return roots, nil
	}
	roots = append(roots, gitDir)
	if b, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		common := strings.TrimSpace(string(b))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
		if c, err := filepath.EvalSymlinks(common); err == nil && isGitDir(c) {
			roots = append(roots, c)
		}
	}
	return roots, nil
}

// findGitDir returns the git directory of the repository dir is in:
// the first .git up from dir, a directory or a "gitdir:" file ("": none).
// Git follows a .git that is a symlink: its target is the repository's
// (a directory, returned resolved, or a gitdir: file, whose relative
// path starts in the symlink's directory, as git reads it).
func findGitDir(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		p := filepath.Join(d, ".git")
		if fi, err := os.Stat(p); err == nil {
			if fi.IsDir() && isGitDir(p) {
				if r, err := filepath.EvalSymlinks(p); err == nil {
					return r
				}
			}
			if fi.Mode().IsRegular() {
				return gitFileTarget(d, p)
			}
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// gitFileTarget reads a "gitdir: PATH" file (relative to the directory
// it is in) and returns the directory it names, or "".
func gitFileTarget(dir, file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	target, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return ""
	}
	target = strings.TrimSpace(target)
	if !filepath.IsAbs(target) {
		target = filepath.Join(dir, target)
	}
	t, err := filepath.EvalSymlinks(target)
	if err != nil {
		return ""
	}
	if !isGitDir(t) {
		return ""
	}
	return t
}

// isGitDir reports whether dir looks like a git directory (HEAD, or the
// objects of a common directory), so that a stray .git file cannot make
// any directory writable.
func isGitDir(dir string) bool {
	for _, name := range []string{"HEAD", "objects"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
