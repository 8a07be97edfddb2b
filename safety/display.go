package safety

import (
	"os"
	"path/filepath"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Display returns the command as it should be shown to the user: agents
// often prefix commands with `cd WORKDIR &&` although they already run in
// workdir, and the prefix only hides what the command does. A leading `cd
// DIR &&` or `cd DIR;` is dropped when DIR resolves to workdir, so `cd W &&
// make || echo x` shows `make || echo x`. DIR and workdir are compared after
// cleaning them, and also after resolving symlinks when both exist; DIR may
// be relative to workdir or start with ~ or $HOME. A cd elsewhere, `cd W ||
// X`, `cd W &`, a cd with a redirection, or anything Display cannot parse
// is returned unchanged, as is everything when workdir is "". The result is
// a slice of the original text, never reformatted.
func Display(command, workdir string) string {
	return display(&source{text: command}, workdir)
}

// display is Display on a source that other analyses share.
func display(src *source, workdir string) string {
	command := src.text
	if workdir == "" || !strings.Contains(command, "cd") || len(command) > maxCommandBytes {
		return command
	}
	f, err := src.tree()
	if err != nil || len(f.Stmts) == 0 {
		return command
	}
	first := f.Stmts[0]
	if isCdTo(first, workdir) {
		// cd W; X  (or cd W <newline> X)
		if len(f.Stmts) > 1 && !first.Background {
			return sliceFrom(command, src.off(f.Stmts[1].Pos()))
		}
		return command
	}
	// cd W && X [|| Y ...]: find the leftmost leaf of the && / || chain.
	if first.Negated || first.Background || len(first.Redirs) > 0 {
		return command
	}
	bin, ok := first.Cmd.(*syntax.BinaryCmd)
	if !ok {
		return command
	}
	for {
		x, ok := bin.X.Cmd.(*syntax.BinaryCmd)
		if !ok || bin.X.Negated || len(bin.X.Redirs) > 0 {
			break
		}
		bin = x
	}
	if bin.Op != syntax.AndStmt || !isCdTo(bin.X, workdir) {
		return command
	}
	return sliceFrom(command, src.off(bin.Y.Pos()))
}

func sliceFrom(s string, off int) string {
	if off <= 0 || off > len(s) {
		return s
	}
	return s[off:]
}

// isCdTo reports whether s is a plain `cd DIR` whose DIR resolves to workdir.
func isCdTo(s *syntax.Stmt, workdir string) bool {
	if s == nil || s.Negated || len(s.Redirs) > 0 {
		return false
	}
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 || len(call.Args) == 0 {
		return false
	}
	var r resolver
	name, ok := r.wordLit(call.Args[0])
	if !ok || name != "cd" {
		return false
	}
	args := call.Args[1:]
	for len(args) > 0 {
		a, ok := r.wordLit(args[0])
		if !ok || a != "-L" && a != "-P" && a != "-e" && a != "-@" && a != "-Pe" && a != "--" {
			break
		}
		args = args[1:]
		if a == "--" {
			break
		}
	}
	dir := homeMark
	switch len(args) {
	case 0:
	case 1:
		d, ok := r.wordLit(args[0])
		if !ok || d == "" || d == "-" || strings.HasPrefix(d, "-") {
			return false
		}
		dir = d
	default:
		return false
	}
	return sameDir(expandDir(dir, workdir), workdir)
}

// expandDir resolves ~ and relative paths against workdir.
func expandDir(dir, workdir string) string {
	if dir == homeMark || strings.HasPrefix(dir, homeMark+"/") {
		h, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = h + dir[1:]
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(workdir, dir)
	}
	return filepath.Clean(dir)
}

func sameDir(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	a, b = filepath.Clean(a), filepath.Clean(b)
	if a == b {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}
