//go:build linux

package gitpolicy

import (
	"path/filepath"
	"strings"

	"github.com/bashvisor/bashvisor/internal/layer"
)

// worktree judges a change outside every git directory: .git names and
// .gitmodules.
func (k *checker) worktree(c layer.Change) verdict {
	name := filepath.Base(c.Path)
	switch {
	case name == ".git":
		if vd, ok := k.linkedDotGit(c); ok {
			return vd
		}
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
