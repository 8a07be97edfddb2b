package engine

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/bashvisor/bashvisor/internal/jobs"
)

// A change report, as the model reads it, names the working tree's files
// first and sums up what the command did to git's own files in words:
//
//	[changed 2 files: M a.txt, A b.txt; git: committed on main, index updated]
//
// A background job's report lists each path once (its checkpoints and its
// end may each have changed it: "A" then "M" is "A").

// reportWidth bounds the listed files of a change line; the rest are
// counted ("…, and 12 more").
const reportWidth = 200

// entry is one listed change of a report, as a line shows it.
type entry struct {
	path string // absolute
	kind string // A, M, D, T
	dir  bool
	size int64
}

// entries are the listed changes of c, each path once, in the order they
// were first applied (see merge).
func entries(c jobs.Changes) []entry {
	var out []entry
	for _, ch := range c.Report.Listed() {
		out = append(out, entry{path: ch.Path, kind: string(ch.Kind), dir: ch.Mode&fs.ModeDir != 0, size: ch.Size})
	}
	return merge(out)
}

// merge folds the changes of one path into one, where a job's checkpoints
// and its end each listed it: added then changed is added, added then
// deleted is nothing, deleted then added is modified, changed then
// deleted is deleted.
func merge(es []entry) []entry {
	at := map[string]int{}
	out := es[:0:0]
	for _, e := range es {
		i, seen := at[e.path]
		if !seen {
			at[e.path] = len(out)
			out = append(out, e)
			continue
		}
		prev := out[i].kind
		switch {
		case prev == "" || prev == "A" && e.kind != "D":
			if prev == "" {
				out[i].kind = e.kind
			}
		case prev == "A" && e.kind == "D":
			out[i].kind = "" // created and removed again: nothing changed
		case prev == "D" && e.kind != "D":
			out[i].kind = "M"
		default:
			out[i].kind = e.kind
		}
		out[i].dir, out[i].size = e.dir, e.size
	}
	kept := out[:0]
	for _, e := range out {
		if e.kind != "" {
			kept = append(kept, e)
		}
	}
	return kept
}

// listedChanges are the changes of c for the API (Result.Changes),
// relative to cwd, each path once.
func listedChanges(c jobs.Changes, cwd string) []Change {
	es := entries(c)
	if len(es) == 0 {
		return nil
	}
	out := make([]Change, 0, len(es))
	for _, e := range es {
		out = append(out, Change{Path: e.display(cwd), Kind: e.kind, Size: e.size})
	}
	return out
}

// display is e's path relative to cwd when below it, "/"-terminated for
// a directory.
func (e entry) display(cwd string) string {
	p := rel(cwd, e.path)
	if e.dir {
		p += "/"
	}
	return p
}

// gitPart returns the path of p inside a git directory (".git/…"), and
// whether p is in one; a path that is a .git directory itself is in it
// with "".
func gitPart(p string) (string, bool) {
	p = filepath.ToSlash(p)
	if strings.HasSuffix(p, "/.git") {
		return "", true
	}
	if i := strings.LastIndex(p, "/.git/"); i >= 0 {
		return p[i+len("/.git/"):], true
	}
	return "", false
}

// changeLine is the line of a report: "[changed 2 files: M a.txt, A b.txt;
// git: committed on main]", "[git: index updated]"; "" when nothing
// changed. undo words git's changes as taken back.
func changeLine(c jobs.Changes, cwd string, undo bool) string {
	var files []entry
	var git []string
	for _, e := range entries(c) {
		if in, ok := gitPart(e.path); ok {
			if !e.dir || e.kind == "D" {
				git = append(git, e.kind+" "+in)
			}
			continue
		}
		files = append(files, e)
	}
	gitText := gitSummary(git, undo)
	if len(files) == 0 {
		if gitText == "" {
			return ""
		}
		return "[git: " + gitText + "]"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[changed %d %s: ", len(files), plural(len(files), "file", "files"))
	for i, e := range files {
		item := e.kind + " " + e.display(cwd)
		if i > 0 {
			item = ", " + item
		}
		rest := ""
		if left := len(files) - i - 1; left > 0 {
			rest = fmt.Sprintf(", and %d more", left)
		}
		if i > 0 && b.Len()+len(item)+len(rest)+1 > reportWidth {
			fmt.Fprintf(&b, ", and %d more", len(files)-i)
			break
		}
		b.WriteString(item)
	}
	if gitText != "" {
		b.WriteString("; git: " + gitText)
	}
	b.WriteString("]")
	return b.String()
}

// gitSummary words the changes to git's files ("KIND path-in-.git"), as
// far as their paths tell: branches and tags created, deleted or moved (a
// moved branch with a new commit message is a commit), HEAD switched, the
// index, the stash, objects, and a count of the rest. "" for none.
func gitSummary(changes []string, undo bool) string {
	var (
		parts                                     []string
		index, objects, message, head, stash, ini bool
		moved                                     []string
		other                                     int
	)
	for _, c := range changes {
		kind, p, _ := strings.Cut(c, " ")
		switch {
		case p == "" || p == "HEAD" && kind == "A":
			ini = ini || kind == "A"
		case p == "index":
			index = true
		case p == "COMMIT_EDITMSG":
			message = true
		case p == "HEAD":
			head = true
		case strings.HasPrefix(p, "objects/"):
			objects = true
		case p == "refs/stash":
			stash = true
		case strings.HasPrefix(p, "refs/heads/"), strings.HasPrefix(p, "refs/tags/"):
			if line, branch := refLine(kind, p, undo); branch != "" {
				moved = append(moved, branch)
			} else {
				parts = append(parts, line)
			}
		case strings.HasPrefix(p, "logs/"), p == "ORIG_HEAD", p == "FETCH_HEAD", p == "packed-refs",
			strings.HasSuffix(p, ".lock"):
			// Reflogs and bookkeeping: told by the refs they follow.
		default:
			other++
		}
	}
	if ini {
		other = 0 // a new repository's description, config, hooks
		if !undo {
			parts = append([]string{"repository created"}, parts...)
		}
	}
	for _, b := range moved {
		switch {
		case undo:
			parts = append(parts, "branch "+b+" put back")
		case message:
			parts = append(parts, "committed on "+b)
		default:
			parts = append(parts, "branch "+b+" moved")
		}
	}
	switch {
	case head && message && len(moved) == 0 && !undo:
		parts = append(parts, "committed on a detached HEAD")
	case head && !ini:
		parts = append(parts, "HEAD switched")
	}
	if stash {
		parts = append(parts, "stash updated")
	}
	if index && !ini {
		parts = append(parts, "index updated")
	}
	if objects && len(moved) == 0 && !stash && !ini && len(parts) == 0 {
		parts = append(parts, "objects added")
	}
	if other > 0 {
		parts = append(parts, fmt.Sprintf("%d other %s", other, plural(other, "file", "files")))
	}
	return strings.Join(parts, ", ")
}

// refLine says what a change of kind to the branch or tag ref p did
// ("branch x created", "tag v1 deleted", …), or, for a branch that
// moved, returns its name instead (gitSummary words it with the rest).
func refLine(kind, p string, undo bool) (line, moved string) {
	what, name := "branch", strings.TrimPrefix(p, "refs/heads/")
	if strings.HasPrefix(p, "refs/tags/") {
		what, name = "tag", strings.TrimPrefix(p, "refs/tags/")
	}
	switch {
	case kind == "A" && undo, kind == "D" && undo:
		if kind == "D" {
			return what + " " + name + " restored", ""
		}
		return what + " " + name + " deleted", ""
	case kind == "A":
		return what + " " + name + " created", ""
	case kind == "D":
		return what + " " + name + " deleted", ""
	case what == "branch":
		return "", name
	}
	return what + " " + name + " moved", ""
}

// notAppliedLine says why a command's changes are not in the workspace:
// lost (discarded), or not yet, because a command that shares its layer
// still runs and applies them when it ends (and its result lists them).
func notAppliedLine(why string, discarded bool) string {
	if discarded {
		return "[the command's changes to the workspace were not applied: " + why + "]"
	}
	return "[the command's changes are not in the workspace yet: its layer is shared with a command that still runs " +
		"and cannot be frozen; they are applied when that command ends, and its result lists them]"
}
