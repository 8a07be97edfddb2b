//go:build linux

package gitpolicy

import (
	"bufio"
	"bytes"
	"io/fs"
	"slices"
	"strings"

	"github.com/bashvisor/bashvisor/internal/gitindex"
	"github.com/bashvisor/bashvisor/internal/layer"
)

// entry is a path inside a git directory being judged.
type entry struct {
	g     gitDir
	r     string   // relative, slash-separated
	parts []string // r's components
	name  string   // the last one, without a .lock suffix
	top   string   // the first one (name for a top-level entry)
	kind  layer.Kind
	mode  fs.FileMode // after the change (before it for Deleted)
	dir   bool        // a directory after the change
	path  string      // absolute
}

// gitPath judges the path r (relative, slash-separated) inside the git
// directory g, whose state after the change has mode (kind Deleted:
// mode before). It is an allow-list: what no rule below lets through
// is refused.
func (k *checker) gitPath(g gitDir, r string, kind layer.Kind, mode fs.FileMode) verdict {
	e := entry{g: g, r: r, parts: strings.Split(r, "/"), kind: kind, mode: mode, path: g.path + "/" + r}
	e.name = strings.TrimSuffix(e.parts[len(e.parts)-1], ".lock")
	e.top = e.parts[0]
	if len(e.parts) == 1 {
		e.top = e.name
	}
	e.dir = mode.IsDir() && kind != layer.Deleted
	switch {
	case kind != layer.Deleted && mode&fs.ModeSymlink != 0:
		return refuse(Symlink, "a symlink in a git directory")
	case kind != layer.Deleted && !mode.IsDir() && !mode.IsRegular():
		return refuse(Unknown, "a special file in a git directory")
	}
	if rule, ok := topRules[e.top]; ok {
		return rule(k, e)
	}
	return k.topFile(e)
}

// topRules judge the entries of a git directory by their first
// component.
var topRules = map[string]func(*checker, entry) verdict{
	"config":          (*checker).configEntry,
	"config.worktree": (*checker).configEntry,
	"hooks":           func(_ *checker, e entry) verdict { return hooksEntry(e) },
	"commondir":       (*checker).commondirEntry,
	"gitdir":          (*checker).gitdirEntry,
	"modules":         func(*checker, entry) verdict { return refuse(Modules, "a new submodule's git directory") },
	"worktrees":       (*checker).worktreesEntry,
	"locked":          func(*checker, entry) verdict { return refuse(Worktrees, "a linked worktree's admin files") },
	"info":            (*checker).infoEntry,
	"objects":         (*checker).objectsEntry,
	"refs":            (*checker).refsEntry,
	"logs":            (*checker).logsEntry,
	"rebase-merge":    (*checker).rebaseState,
	"rebase-apply":    (*checker).rebaseState,
	"sequencer":       (*checker).rebaseState,
	"rr-cache":        (*checker).rerereEntry,
	"reftable":        func(*checker, entry) verdict { return refuse(Unknown, "reftable (not checked)") },
	"branches": func(_ *checker, e entry) verdict {
		if !e.g.existed && len(e.parts) == 1 && e.dir {
			return allowed // the template's empty directory
		}
		return refuse(Unknown, "branches/ (remote configuration)")
	},
	"remotes": func(*checker, entry) verdict { return refuse(Unknown, "remotes/ (remote configuration)") },
}

// fileCheck checks a file's content: it says what is wrong, or "".
type fileCheck func(k *checker, e entry, b []byte) string

// file judges a data file: removing it is allowed, a directory in its
// place is not, and what it holds after must pass check (read up to
// limit bytes).
func (k *checker) file(e entry, rule Rule, limit int64, check fileCheck) verdict {
	if v, done := notAFile(e); done {
		return v
	}
	b, why := k.readLimit(e.path, limit)
	if why == "" {
		why = check(k, e, b)
	}
	if why != "" {
		return refuse(rule, why)
	}
	return allowed
}

// notAFile judges a data file's entry when it is not a file to check:
// removing it is allowed, a directory in its place is not; done is
// false when its content is to be checked.
func notAFile(e entry) (v verdict, done bool) {
	switch {
	case e.kind == layer.Deleted:
		return allowed, true
	case e.dir:
		return refuse(Unknown, "a directory where git keeps a file"), true
	}
	return allowed, false
}

// anyText is the check of files git reads as a message or as its own
// arguments, never as a command.
func anyText(*checker, entry, []byte) string { return "" }

// topFiles are the files at the top of a git directory that git
// writes, with the check of their content.
var topFiles = map[string]fileCheck{
	"HEAD": refOrOID, "NOTES_MERGE_REF": refOrOID,
	"ORIG_HEAD": oidLines, "MERGE_HEAD": oidLines, "CHERRY_PICK_HEAD": oidLines, "REVERT_HEAD": oidLines,
	"REBASE_HEAD": oidLines, "AUTO_MERGE": oidLines, "BISECT_HEAD": oidLines, "BISECT_EXPECTED_REV": oidLines,
	"MERGE_AUTOSTASH": oidLines, "NOTES_MERGE_PARTIAL": oidLines, "shallow": oidLines,
	"FETCH_HEAD": fetchHead, "packed-refs": packedRefs, "MERGE_RR": mergeRR,
	"COMMIT_EDITMSG": anyText, "MERGE_MSG": anyText, "SQUASH_MSG": anyText, "TAG_EDITMSG": anyText,
	"NOTES_EDITMSG": anyText, "MERGE_MODE": anyText, "description": anyText, "gc.pid": anyText, "gc.log": anyText,
	"BISECT_LOG": anyText, "BISECT_TERMS": anyText, "BISECT_NAMES": anyText, "BISECT_START": anyText,
	"BISECT_ANCESTORS_OK": anyText, "BISECT_FIRST_PARENT": anyText,
}

// topFile judges a file at the top of a git directory that no rule of
// topRules covers.
func (k *checker) topFile(e entry) verdict {
	if len(e.parts) != 1 {
		return refuse(Unknown, "a file git does not write")
	}
	if e.name == "HEAD" && e.g.existed && (e.kind == layer.Deleted || !e.mode.IsRegular()) {
		return refuse(Structure, "a repository's HEAD")
	}
	if check, ok := topFiles[e.name]; ok {
		return k.file(e, Ref, maxCheckedFile, check)
	}
	if isIndexName(e.name) {
		return k.file(e, Index, maxDataFile, indexFile)
	}
	if strings.HasSuffix(e.name, "_HEAD") && strings.ToUpper(e.name) == e.name {
		return k.file(e, Ref, maxCheckedFile, refOrOID) // another pseudo-ref
	}
	return refuse(Unknown, "a file git does not write")
}

// isIndexName reports whether name is one of the index files git
// writes: the index, its temporary copies and split index parts.
func isIndexName(name string) bool {
	if name == "index" {
		return true
	}
	for _, p := range []string{"index.", "sharedindex.", "next-index-"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// indexFile checks an index: it parses as git reads it, every path in
// it is one git may write (indexPaths), and no gitlink points into a
// repository that is new.
func indexFile(k *checker, e entry, b []byte) string {
	ix, err := gitindex.Parse(b, k.hashSize(e.g))
	if err != nil {
		return "an index that does not parse: " + err.Error()
	}
	if why := indexPaths(ix); why != "" {
		return why
	}
	if ix.Shared != "" {
		// A split index's cache tree covers its shared index's entries.
		shared, err := k.v.ReadFile(e.g.path+"/sharedindex."+ix.Shared, true, maxDataFile)
		if err != nil {
			return "a split index whose shared index cannot be read: " + err.Error()
		}
		six, err := gitindex.Parse(shared, k.hashSize(e.g))
		if err != nil {
			return "a split index whose shared index does not parse: " + err.Error()
		}
		if err := ix.CheckSplit(six); err != nil {
			return "an index that does not parse: " + err.Error()
		}
	}
	for _, x := range slices.Concat(ix.Entries, ix.Undo) {
		if x.Mode == modeGitlink && k.newRepoAt(e.g, x.Name) {
			return "an index entry " + quote(x.Name) + " links a repository that is new"
		}
	}
	return ""
}

// newRepoAt reports whether the working tree of g has a repository at
// rel that was not there before the command.
func (k *checker) newRepoAt(g gitDir, rel string) bool {
	if !isDotGit(baseName(g.path)) {
		return false
	}
	p := dirName(g.path) + "/" + rel + "/.git"
	_, berr := k.v.Lstat(p, false)
	_, aerr := k.v.Lstat(p, true)
	return aerr == nil && berr != nil
}

func hooksEntry(e entry) verdict {
	switch {
	case len(e.parts) == 1 && e.dir:
		return allowed
	case len(e.parts) == 2 && strings.HasSuffix(e.name, ".sample") && (e.kind == layer.Deleted || e.mode.IsRegular()):
		return allowed // git never runs a *.sample hook
	}
	return refuse(Hooks, "a hook (a program git runs)")
}

func (k *checker) infoEntry(e entry) verdict {
	newRepo := !e.g.existed
	switch {
	case e.r == "info/refs":
		return k.file(e, Ref, maxDataFile, infoRefs) // refs for dumb HTTP, which git repack writes
	case newRepo && len(e.parts) == 1 && e.dir:
		return allowed
	case newRepo && e.r == "info/exclude" && e.mode.IsRegular():
		if k.commentsOnly(e.path) {
			return allowed
		}
		return refuse(Info, "info/exclude of a new repository holds patterns")
	}
	return refuse(Info, "info/ (what git ignores and reads)")
}

// structural refuses removing or replacing one of an existing
// repository's top directories (objects, refs).
func structural(e entry, what string) verdict {
	if len(e.parts) == 1 && e.g.existed && !e.dir {
		return refuse(Structure, what)
	}
	if len(e.parts) == 1 && !e.dir {
		return refuse(Unknown, what+" that is not a directory")
	}
	return allowed
}

// refsEntry judges refs/: directories, and files whose name is a ref
// name and which hold an object id or a symbolic ref.
func (k *checker) refsEntry(e entry) verdict {
	if len(e.parts) == 1 || e.kind == layer.Deleted && e.mode.IsDir() {
		return structural(e, "a repository's refs directory")
	}
	name := strings.Join(append(slices.Clone(e.parts[:len(e.parts)-1]), e.name), "/")
	if why := checkRefname(name); why != "" {
		return refuse(Ref, "a ref name "+why)
	}
	if e.dir || e.kind == layer.Deleted {
		return allowed
	}
	return k.file(e, Ref, maxCheckedFile, refOrOID)
}

// logsEntry judges logs/: reflogs of HEAD and of refs, each line two
// object ids, an identity and a message.
func (k *checker) logsEntry(e entry) verdict {
	if e.dir || e.kind == layer.Deleted {
		return allowed
	}
	name := strings.Join(append(slices.Clone(e.parts[1:len(e.parts)-1]), e.name), "/")
	if name != "HEAD" && checkRefname(name) != "" && !(len(e.parts) == 2 && isPseudoref(e.name)) {
		return refuse(Ref, "a reflog of "+quote(name)+", which is not a ref")
	}
	return k.file(e, Ref, maxDataFile, reflog)
}

// rerereEntry judges rr-cache/: a directory per conflict (named by its
// hash), holding the images of its resolution (file contents).
func (k *checker) rerereEntry(e entry) verdict {
	switch {
	case len(e.parts) == 1:
		return structural(e, "rerere's directory")
	case len(e.parts) == 2 && isHex(e.parts[1]):
		return allowed
	case len(e.parts) == 3 && rerereImage(e.name) && !e.dir:
		return allowed
	}
	return refuse(Unknown, "a file rerere does not write")
}

func rerereImage(name string) bool {
	base, _, _ := strings.Cut(name, ".")
	switch base {
	case "preimage", "postimage", "thisimage":
		return true
	}
	return false
}

// maxCheckedFile bounds what is read of a small file to check its
// content; a larger one is refused.
const maxCheckedFile = 1 << 20

// maxDataFile bounds what is read of an index, a reflog or the content
// of a loose object to check it; a larger one is refused. Packs and the
// files git ends with their checksum are read through their hash, in
// constant memory, whatever their size. A variable for tests.
var maxDataFile int64 = 128 << 20

// read returns the content of p after the command, or why it cannot be
// checked.
func (k *checker) read(p string) ([]byte, string) {
	return k.readLimit(p, maxCheckedFile)
}

func (k *checker) readLimit(p string, limit int64) ([]byte, string) {
	b, err := k.v.ReadFile(p, true, limit+1)
	switch {
	case err != nil:
		return nil, "unreadable: " + err.Error()
	case int64(len(b)) > limit:
		return nil, "too large to check"
	}
	return b, ""
}

// commentsOnly reports whether the file p holds only comments and blank
// lines.
func (k *checker) commentsOnly(p string) bool {
	b, why := k.read(p)
	if why != "" {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return sc.Err() == nil
}

func baseName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

func dirName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i > 0 {
		return p[:i]
	}
	return "/"
}
