//go:build linux

package gitpolicy

import (
	"strings"
	"unicode/utf8"
)

// isDotGit reports whether name is ".git" as git would see it on some
// file system (git's is_ntfs_dotgit and is_hfs_dotgit): any case, with
// trailing dots or spaces (NTFS drops them), the 8.3 short name "git~1",
// or with the code points HFS+ ignores.
func isDotGit(name string) bool {
	n := strings.ToLower(stripHFSIgnorable(name))
	if n == "git~1" {
		return true
	}
	n = strings.TrimRight(n, ". ")
	// NTFS alternate data streams: ".git::$INDEX_ALLOCATION".
	if i := strings.IndexByte(n, ':'); i >= 0 {
		n = n[:i]
	}
	return n == ".git"
}

// isDotGitmodules is isDotGit for ".gitmodules" (and its 8.3 names).
func isDotGitmodules(name string) bool {
	n := strings.TrimRight(strings.ToLower(stripHFSIgnorable(name)), ". ")
	return n == ".gitmodules" || strings.HasPrefix(n, "gitmod~")
}

// stripHFSIgnorable removes the code points HFS+ ignores in names
// (git's next_hfs_char).
func stripHFSIgnorable(s string) string {
	if !strings.ContainsFunc(s, hfsIgnorable) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if !hfsIgnorable(r) {
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

func hfsIgnorable(r rune) bool {
	switch {
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}
