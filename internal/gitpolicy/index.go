//go:build linux

package gitpolicy

import (
	"fmt"
	"strings"

	"github.com/bashvisor/bashvisor/internal/gitindex"
)

// The index (read-cache.c): a header, entries, extensions and a
// checksum. Git writes the files of the working tree from the index
// (git restore ., git checkout .) without checking the paths again, so
// an index is data only when every path in it passes git's verify_path.

// indexPaths checks what git reads as paths in an index (parsed by
// package gitindex, which checks the structure of every part): every
// entry and resolve-undo path passes verify_path with its mode, and so
// does every directory of the cache tree and every directory and file
// of the untracked cache (git status lists those as the working tree's
// untracked files: a forged ../x shows as "?? ../x"); the untracked
// cache names no exclude file but .gitignore. It says what is wrong, or
// "".
func indexPaths(ix *gitindex.Index) string {
	for _, x := range ix.Entries {
		if why := badIndexEntry(x, ix.Shared != ""); why != "" {
			return "an index entry git must not write: " + why
		}
	}
	for _, x := range ix.Undo {
		if why := badIndexEntry(x, false); why != "" {
			return "a resolve-undo entry git must not write: " + why
		}
	}
	for _, d := range ix.Trees {
		if why := verifyPath(d, modeFile); d != "" && why != "" {
			return fmt.Sprintf("a cache tree directory %q %s", d, why)
		}
	}
	for _, u := range ix.Untracked {
		if why := verifyPath(strings.TrimSuffix(u, "/"), modeFile); why != "" {
			return fmt.Sprintf("an untracked cache path %q %s", u, why)
		}
	}
	if ix.ExcludePerDir != "" && ix.ExcludePerDir != ".gitignore" {
		return "an untracked cache whose exclude file is " + quote(ix.ExcludePerDir)
	}
	return ""
}

// Index entry modes git writes (mode bits as in the index).
const (
	modeFile    = 0o100644
	modeExec    = 0o100755
	modeSymlink = 0o120000
	modeGitlink = 0o160000
	modeDir     = 0o040000 // a sparse directory entry
)

// badIndexEntry says what is wrong with an entry, or "".
func badIndexEntry(e gitindex.Entry, split bool) string {
	switch e.Mode {
	case modeFile, modeExec, modeSymlink, modeGitlink, modeDir, 0o100664:
	default:
		return fmt.Sprintf("mode %o", e.Mode)
	}
	if e.Name == "" && split {
		return "" // replaces an entry of the shared index, which is checked
	}
	if why := verifyPath(e.Name, e.Mode); why != "" {
		return fmt.Sprintf("path %q %s", e.Name, why)
	}
	return ""
}

// verifyPath is git's verify_path with the checks of every platform
// on (core.protectNTFS and core.protectHFS): it says why git must not
// write path, or "".
func verifyPath(path string, mode uint32) string {
	switch {
	case path == "":
		return "is empty"
	case strings.HasPrefix(path, "/"):
		return "is absolute"
	case len(path) >= 2 && path[1] == ':' && isAlpha(path[0]):
		return "has a drive letter"
	}
	if mode == modeDir {
		if !strings.HasSuffix(path, "/") {
			return "is a directory entry without a final /"
		}
		path = strings.TrimSuffix(path, "/")
	}
	parts := strings.FieldsFunc(path, func(r rune) bool { return r == '/' || r == '\\' })
	if strings.Contains(path, "//") || strings.HasSuffix(path, "/") || strings.Contains(path, "\\\\") {
		return "has an empty component"
	}
	for i, c := range parts {
		switch {
		case c == "." || c == "..":
			return "has a " + c + " component"
		case isDotGit(c):
			return "passes through .git"
		case i == len(parts)-1 && mode == modeSymlink && isDotGitmodules(c):
			return "is a symlink named .gitmodules"
		case strings.ContainsRune(c, 0):
			return "holds a NUL"
		}
	}
	return ""
}
