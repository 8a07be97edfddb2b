//go:build linux

package gitpolicy

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// Code reached through symlinks. Git runs a hook or a program by the
// path the configuration names, and the kernel follows every symlink
// on the way: core.fsmonitor = tools/fsm.sh runs other/fsm.sh when
// tools is a symlink to other, whether the command made that symlink
// or it was there already. So the paths the configurations name are
// also matched as they resolve in the tree apply will produce, and a
// change that makes a directory on the way to one a symlink is refused
// (it moves the program to wherever it points, without changing it).

// maxLinks bounds the symlinks followed resolving one path (Linux's
// limit): a path that needs more does not resolve for git either.
const maxLinks = 40

// codeResolved is k.code's hooks, programs and configuration files,
// each also as it resolves in the tree after the command
// (spellings). It resolves each path once per checker, and those the
// configurations add while changes are judged when they are added.
func (k *checker) codeResolved() *code {
	r := k.resolved
	if r == nil {
		r = &code{configs: map[string]bool{}, ways: map[string]bool{}}
		k.resolved = r
	}
	if len(k.code.configs) != k.resolvedN[2] {
		for p := range k.code.configs { // a few files: all again
			for _, q := range k.spellings(p, r.ways) {
				r.configs[q] = true
			}
		}
		k.resolvedN[2] = len(k.code.configs)
	}
	add := func(out *[]string, list []string, n *int) {
		for _, p := range list[*n:] {
			*out = append(*out, k.spellings(p, r.ways)...)
		}
		*n = len(list)
	}
	add(&r.hooks, k.code.hooks, &k.resolvedN[0])
	add(&r.programs, k.code.programs, &k.resolvedN[1])
	return r
}

// spellings returns the path p a configuration names (absolute, its ..
// components kept: rawPath) as it is matched: cleaned as text, as named
// (so that a symlink made on the way to one of its .. components is on
// its way), and as it resolves in the tree after the command. It
// records in ways every symlink that resolution goes through: a change
// to one (made by the command in the middle of a chain: tools -> x, x
// made a symlink to other) moves the file without being on its way as
// named.
func (k *checker) spellings(p string, ways map[string]bool) []string {
	out := []string{filepath.Clean(p)}
	if p != out[0] {
		out = append(out, p)
	}
	if q, ok := k.resolveVia(p, true, ways); ok && !slices.Contains(out, q) {
		out = append(out, q)
	}
	return out
}

// rawPath joins dir and p (p as it is when absolute) with the empty
// and . components dropped and the .. ones kept: git hands a path a
// configuration names to the kernel as written, which resolves a ..
// after the symlinks before it (tools/../hooks is other/hooks's parent's
// hooks when tools is a symlink to other/deep), so it is cleaned as text
// only where that is known to be what the kernel does (spellings).
func rawPath(dir, p string) string {
	if !strings.HasPrefix(p, "/") {
		p = dir + "/" + p
	}
	var b strings.Builder
	for c := range strings.SplitSeq(p, "/") {
		if c != "" && c != "." {
			b.WriteString("/" + c)
		}
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

// resolveIn is p resolved in the tree before or after the command
// (resolvePath), or p cleaned as text when it does not
// resolve.
func (k *checker) resolveIn(p string, after bool) string {
	if q, ok := k.resolvePath(p, after); ok {
		return q
	}
	return filepath.Clean(p)
}

// resolvePath returns the absolute path p with every symlink on it (its
// last component too) replaced by its target in the tree before or
// after the command, and each .. taken after the symlinks before it,
// as the kernel resolves it; a missing component ends the resolution
// (the rest is kept as named, cleaned). ok is false after maxLinks
// symlinks or an unreadable one.
func (k *checker) resolvePath(p string, after bool) (string, bool) {
	return k.resolveVia(p, after, nil)
}

// resolveVia is resolvePath recording in ways (unless nil) each symlink
// it follows.
func (k *checker) resolveVia(p string, after bool, ways map[string]bool) (string, bool) {
	done := "/"
	rest := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for links := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			done = filepath.Dir(done)
			continue
		}
		next := filepath.Join(done, name)
		fi, err := k.v.Lstat(next, after)
		if err != nil {
			return filepath.Join(append([]string{next}, rest...)...), true
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = next
			continue
		}
		if ways != nil {
			ways[next] = true
		}
		if links++; links > maxLinks {
			return p, false
		}
		target, err := k.v.Readlink(next, after)
		if err != nil {
			return p, false
		}
		if filepath.IsAbs(target) {
			done = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return done, true
}
