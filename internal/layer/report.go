//go:build linux

package layer

import (
	"fmt"
	"path/filepath"
	"strings"
)

// DefaultSummaryWidth bounds the length of a [Summary] line.
const DefaultSummaryWidth = 200

// Summary is the one-line change report of a command, as the model
// reads it: "[changed 3 files: M src/a.go, A b.txt, D old.txt]". Paths
// are relative to base when below it (the command's working directory);
// a directory ends in "/"; directories whose changes are listed below
// them are left out (an added directory shows as the files in it).
// Entries are listed in order until the line would pass width bytes
// (0: DefaultSummaryWidth); the rest is counted: "…, and 12 more]".
// No changes: "".
func Summary(changes []Change, base string, width int) string {
	if width <= 0 {
		width = DefaultSummaryWidth
	}
	shown := Listed(changes)
	if len(shown) == 0 {
		return ""
	}
	noun := "files"
	if len(shown) == 1 {
		noun = "file"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[changed %d %s: ", len(shown), noun)
	for i, c := range shown {
		item := string(c.Kind) + " " + c.Display(base)
		if i > 0 {
			item = ", " + item
		}
		rest := ""
		if left := len(shown) - i - 1; left > 0 {
			rest = fmt.Sprintf(", and %d more", left)
		}
		if i > 0 && b.Len()+len(item)+len(rest)+1 > width {
			fmt.Fprintf(&b, ", and %d more", len(shown)-i)
			break
		}
		b.WriteString(item)
	}
	b.WriteString("]")
	return b.String()
}

// Listed returns the changes a report lists: every change but a
// directory whose subtree has changes listed too (an added directory
// shows as the files in it; an emptied and refilled one as its
// entries).
func Listed(changes []Change) []Change {
	out := make([]Change, 0, len(changes))
	for i, c := range changes {
		if c.Mode.IsDir() && c.Kind != Deleted && i+1 < len(changes) && below(changes[i+1].Path, c.Path) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// Display is c's path as a report shows it: relative to base when below
// it (Rel), "/"-terminated for a directory.
func (c Change) Display(base string) string {
	p := Rel(base, c.Path)
	if c.Mode.IsDir() {
		p += "/"
	}
	return p
}

// Rel is p relative to base when p is base or below it, p otherwise (and
// when base is empty).
func Rel(base, p string) string {
	if base == "" {
		return p
	}
	if r, err := filepath.Rel(base, p); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
		return r
	}
	return p
}

// ConflictError is [Store.Undo]'s refusal: the paths changed after the
// steps to undo (outside the sandbox, or by a later command).
type ConflictError struct {
	// Paths are the absolute paths that changed, sorted.
	Paths []string
}

// maxConflictPaths bounds the paths ConflictError.Error names.
const maxConflictPaths = 8

func (e *ConflictError) Error() string {
	names := e.Paths
	more := ""
	if len(names) > maxConflictPaths {
		more = fmt.Sprintf(" and %d more", len(names)-maxConflictPaths)
		names = names[:maxConflictPaths]
	}
	return "layer: cannot undo: changed since: " + strings.Join(names, ", ") + more +
		"; undo fewer steps, or put these paths back by hand first"
}
