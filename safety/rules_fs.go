package safety

import (
	"maps"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
)

// find: the command of -exec/-execdir/-ok/-okdir is checked like any
// other, with {} standing for what find finds: when no test filters the
// names before it, that is each starting point (and, from -mindepth 1,
// everything in it), otherwise the literal {}. -delete on a critical
// starting point is blocked.
func (c *checker) find(args []field, in stdinSrc) {
	var starts []field
	expr := false
	del, filtered, deep := false, false, false
	for i := 1; i < len(args); i++ {
		a := args[i].s
		if !expr && (strings.HasPrefix(a, "-") && a != "-" || a == "(" || a == "!") {
			if a != "-H" && a != "-L" && a != "-P" && !strings.HasPrefix(a, "-O") && a != "-D" {
				expr = true
			} else {
				if a == "-D" {
					i++
				}
				continue
			}
		}
		if !expr {
			starts = append(starts, args[i])
			continue
		}
		switch a {
		case "-delete":
			del = true
		case "-depth", "-d", "-xdev", "-mount", "-noleaf", "-ignore_readdir_race", "-daystart", "-follow":
		case "-maxdepth", "-mindepth":
			if i+1 < len(args) && a == "-mindepth" && args[i+1].s != "0" {
				deep = true
			}
			i++
		default:
			filtered = true
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j].s != ";" && args[j].s != "+" {
				j++
			}
			if j > i+1 {
				cin := in // -ok asks on find's stdin and gives the command /dev/null
				if a == "-ok" || a == "-okdir" {
					cin = stdinSrc{}
				}
				c.findExec(args[i+1:j], starts, filtered, deep, cin)
			}
			filtered = true
			i = j
		}
	}
	if del && !filtered {
		if len(starts) == 0 {
			starts = []field{{s: "."}}
		}
		for _, s := range starts {
			if c.criticalTarget(s) {
				c.report(Verdict{Decision: Block, Rule: "rm-critical",
					Reason:      "find " + s.s + " -delete would delete a critical directory tree",
					Alternative: "run find on the specific project directory you mean (e.g. find ./build -delete)"})
				return
			}
		}
	}
}

func (c *checker) rm(args []field) {
	rec, noPreserve := false, false
	opts := true
	var targets []field
	for _, f := range args[1:] {
		a := f.s
		if opts && a == "--" {
			opts = false
			continue
		}
		if opts && len(a) > 1 && a[0] == '-' && !f.dyn {
			if a[1] == '-' {
				name, _, _ := strings.Cut(a[2:], "=")
				switch {
				case name == "":
				case strings.HasPrefix("recursive", name):
					rec = true
				case strings.HasPrefix("no-preserve-root", name):
					noPreserve = true
				}
				continue
			}
			if strings.ContainsAny(a[1:], "rR") {
				rec = true
			}
			continue
		}
		targets = append(targets, f)
	}
	if !rec {
		return
	}
	for _, t := range targets {
		switch {
		case !c.criticalTarget(t):
		case c.workdirSweep(t):
			c.report(Verdict{Decision: Ask, Rule: "rm-workdir",
				Reason:      "recursive rm of " + strings.TrimSpace(t.s) + " deletes everything in the working directory, which is often the project with uncommitted work",
				Alternative: "delete only the specific paths you mean (e.g. rm -rf ./build), or cd into the directory to empty in the same command (cd build && rm -rf ./*)"})
		default:
			c.report(Verdict{Decision: Block, Rule: "rm-critical",
				Reason:      "recursive rm of " + strings.TrimSpace(t.s) + " would delete a critical directory",
				Alternative: "delete only the specific project paths you mean (e.g. rm -rf ./build)"})
			return
		}
	}
	if noPreserve {
		c.report(Verdict{Decision: Block, Rule: "rm-critical",
			Reason:      "rm --no-preserve-root disables the protection of /",
			Alternative: "delete only the specific project paths you mean (e.g. rm -rf ./build)"})
	}
}

func (c *checker) cd(args []field) {
	var t *field
	for i := 1; i < len(args); i++ {
		a := args[i].s
		if a == "--" {
			if i+1 < len(args) {
				t = &args[i+1]
			}
			break
		}
		if len(a) > 1 && a[0] == '-' {
			continue
		}
		t = &args[i]
		break
	}
	switch {
	case t == nil:
		c.cwd = homeMark
	case t.dyn || t.s == "-" || t.s == "":
		c.cwd = ""
	case strings.HasPrefix(t.s, "/") || strings.HasPrefix(t.s, homeMark):
		c.cwd = cleanPath(t.s)
	case c.cwd != "":
		c.cwd = cleanPath(c.cwd + "/" + t.s)
	}
}

// criticalTarget reports whether deleting f (relative to the known working
// directory, if any) would destroy a critical directory.
//
// A * that was quoted is a literal file name (rm -rf '*' removes a file
// named *), not a pattern.
func (c *checker) criticalTarget(f field) bool {
	if f.dyn || !f.glob && strings.IndexByte(f.s, '*') >= 0 {
		return false
	}
	crit := func(p string) bool { return isCritical(p) || f.glob && c.globMatches(p, isCritical) }
	p := f.s
	if crit(p) {
		return true
	}
	if c.cwd != "" && !strings.HasPrefix(p, "/") && !strings.HasPrefix(p, homeMark) {
		return crit(c.cwd + "/" + p)
	}
	return false
}

// workdirSweep reports whether f is a pattern for the non-hidden entries
// of the working directory (*, ./*, ?*, [!.]*) and the known working
// directory, if any, is not critical: that deletes the project rather than
// the system, and a person may mean it (in a build directory), so it asks.
// Hidden entries (.*) include .git and stay critical.
func (c *checker) workdirSweep(f field) bool {
	p := cleanPath(f.s)
	if !f.glob || strings.Contains(p, "/") || strings.HasPrefix(p, ".") {
		return false
	}
	if j := c.cwd + "/" + p; c.cwd != "" && (isCritical(j) || c.globMatches(j, isCritical)) {
		return false
	}
	if p == "*" || p == "**" {
		return true
	}
	re, ok := compileGlob(p, true)
	return ok && matchAll(re, p, sweepNames)
}

// systemTarget is criticalTarget for chmod and rsync: see isSystemCritical.
func (c *checker) systemTarget(f field) bool {
	return !f.dyn && (isSystemCritical(f.s) || f.glob && c.globMatches(f.s, isSystemCritical))
}

// Bounds on glob matching: longer patterns are not matched.
const (
	maxGlobLen   = 4096 // bytes
	maxGlobComps = 64   // path components
	maxGlobPaths = 256  // expansions tried per pattern
)

// Probe names: a pattern component matching all of sweepNames (*, ?*,
// [!.]*) or of dotSweepNames (.*, .[!.]*, .??*) stands for every entry of
// its directory, as * and .* do.
var (
	sweepNames    = []string{"a", "bin", "Zz", "1", "x.y", "_x-"}
	dotSweepNames = []string{".ssh", ".config", ".git", ".bashrc"}
)

// globMatches expands the glob pattern p the way bash would, but against
// the critical names instead of the file system (/ and its system
// directories, the home directory and the directories above it, .git),
// and reports whether an expansion is critical.
func (c *checker) globMatches(p string, critical func(string) bool) bool {
	if len(p) > maxGlobLen {
		return false
	}
	comps := strings.Split(p, "/")
	start := ""
	if comps[0] == "" {
		start, comps = "/", comps[1:]
	}
	if len(comps) > maxGlobComps {
		return false
	}
	res := make([]*regexp.Regexp, len(comps)) // compiled on first use
	tried := 0
	var walk func(dir string, k int) bool
	walk = func(dir string, k int) bool {
		if tried >= maxGlobPaths {
			return false
		}
		if k == len(comps) {
			tried++
			return critical(dir)
		}
		comp := comps[k]
		if !hasGlobMeta(comp) {
			return walk(joinPath(dir, comp), k+1)
		}
		if res[k] == nil {
			re, ok := compileGlob(comp, true)
			if !ok {
				return false
			}
			res[k] = re
		}
		re := res[k]
		names := globChildren(dir)
		c.work += len(comp) * (len(names) + len(sweepNames) + len(dotSweepNames))
		if matchAll(re, comp, sweepNames) && walk(joinPath(dir, "*"), k+1) ||
			matchAll(re, comp, dotSweepNames) && walk(joinPath(dir, ".*"), k+1) {
			return true
		}
		for _, name := range names {
			if globName(re, comp, name) && walk(joinPath(dir, name), k+1) {
				return true
			}
		}
		return false
	}
	return walk(start, 0)
}

func joinPath(dir, name string) string {
	switch dir {
	case "":
		return name
	case "/":
		return "/" + name
	}
	return dir + "/" + name
}

// globName reports whether the pattern component comp (compiled as re)
// matches name: like bash, a leading dot must be matched by a literal dot.
func globName(re *regexp.Regexp, comp, name string) bool {
	if strings.HasPrefix(name, ".") && !strings.HasPrefix(comp, ".") && !strings.HasPrefix(comp, `\.`) {
		return false
	}
	return re.MatchString(name)
}

func matchAll(re *regexp.Regexp, comp string, names []string) bool {
	for _, n := range names {
		if !globName(re, comp, n) {
			return false
		}
	}
	return true
}

// globChildren returns the critical names in dir that a glob may match.
func globChildren(dir string) []string {
	h := homeDir()
	switch dir {
	case "/":
		names := sysDirList
		if top, _, _ := strings.Cut(strings.TrimPrefix(h, "/"), "/"); top != "" && !sysDirs[top] {
			names = append(slices.Clip(names), top)
		}
		return names
	case "", ".", homeMark:
		return []string{".git"}
	}
	if h != "" && dir == h {
		return []string{".git"}
	}
	if rest, ok := strings.CutPrefix(h, dir+"/"); ok && h != "" {
		next, _, _ := strings.Cut(rest, "/")
		return []string{next}
	}
	return nil
}

// sysDirs are top-level directories whose recursive removal is blocked.
var sysDirs = map[string]bool{"bin": true, "boot": true, "dev": true, "etc": true, "home": true,
	"lib": true, "lib32": true, "lib64": true, "libx32": true, "media": true, "mnt": true, "opt": true,
	"proc": true, "root": true, "run": true, "sbin": true, "snap": true, "srv": true, "sys": true,
	"usr": true, "var": true, "nix": true, "Applications": true, "Library": true, "System": true,
	"Users": true, "Volumes": true, "private": true, "cores": true}

// sysDirList is sysDirs in a fixed order.
var sysDirList = slices.Sorted(maps.Keys(sysDirs))

func cleanPath(p string) string {
	for strings.HasSuffix(p, "/") && len(p) > 1 {
		p = p[:len(p)-1]
	}
	return path.Clean(p)
}

// isCritical reports whether p names /, a top-level system directory, the
// home directory, .git, everything in the working directory or its parent.
func isCritical(p string) bool {
	if p == "" {
		return false
	}
	p = cleanPath(p)
	if h := homeDir(); h != "" && h != "/" {
		if p == h {
			return true
		}
		if r, ok := strings.CutPrefix(p, h+"/"); ok {
			p = homeMark + "/" + r
		}
	}
	for k := 0; k < 2; k++ {
		if p == "/*" || p == "/.*" {
			p = "/"
			break
		}
		if s, ok := strings.CutSuffix(p, "/*"); ok {
			p = s
		} else if s, ok := strings.CutSuffix(p, "/.*"); ok {
			p = s
		} else {
			break
		}
	}
	switch p {
	case "/", homeMark, ".", "..", ".git", "*", ".*", "**", "/*", homeMark + "/.git":
		return true
	}
	if allDotDot(p) {
		return true
	}
	return p[0] == '/' && sysDirs[p[1:]]
}

func homeDir() string {
	h, _ := os.UserHomeDir()
	return h
}

// chmod/chown/chgrp -R on / , a top-level system directory or the home
// directory breaks the system or the user's account.
func (c *checker) chmod(name string, args []field, _ stdinSrc) {
	rec := false
	var targets []field
	opts, needMode := true, true
	for _, f := range args[1:] {
		a := f.s
		if opts && a == "--" {
			opts = false
			continue
		}
		if opts && strings.HasPrefix(a, "--") {
			if a == "--recursive" {
				rec = true
			}
			if strings.HasPrefix(a, "--reference") {
				needMode = false
			}
			continue
		}
		if opts && len(a) > 1 && a[0] == '-' && strings.Trim(a[1:], "RHLPcfvh") == "" {
			if strings.IndexByte(a, 'R') > 0 {
				rec = true
			}
			continue
		}
		if needMode {
			needMode = false // the mode or owner
			continue
		}
		targets = append(targets, f)
	}
	if !rec {
		return
	}
	for _, t := range targets {
		if c.systemTarget(t) {
			c.report(Verdict{Decision: Block, Rule: "chmod-critical",
				Reason:      "recursive " + name + " of " + t.s + " would break the system or the account",
				Alternative: "change only the project paths you mean (e.g. " + name + " -R ... ./build)"})
			return
		}
	}
}

// isSystemCritical reports whether p is /, a top-level system directory or
// the home directory (each optionally with /*): the subset of critical
// targets that stays critical for commands other than rm, where "." or "*"
// are everyday operands.
func isSystemCritical(p string) bool {
	if p == "" {
		return false
	}
	p = cleanPath(p)
	h := homeDir()
	return p == "/" || p == "/*" || p == homeMark || p == homeMark+"/*" || h != "" && h != "/" && (p == h || p == h+"/*") ||
		p[0] == '/' && sysDirs[strings.TrimSuffix(p[1:], "/*")]
}

// rsync --delete into /, a system directory or the home directory wipes it.
func (c *checker) rsync(args []field) {
	del := false
	var pos []field
	for _, f := range args[1:] {
		switch {
		case strings.HasPrefix(f.s, "--del"), f.s == "--remove-source-files":
			del = del || strings.HasPrefix(f.s, "--del")
		case strings.HasPrefix(f.s, "-"):
		default:
			pos = append(pos, f)
		}
	}
	if !del || len(pos) < 2 {
		return
	}
	dst := pos[len(pos)-1]
	if c.systemTarget(dst) {
		c.report(Verdict{Decision: Block, Rule: "rm-critical",
			Reason:      "rsync --delete into " + dst.s + " would delete everything there that the source lacks",
			Alternative: "sync into the specific project directory you mean (e.g. rsync -a --delete src/ ./dest/)"})
	}
}

// maxFindStarts bounds the starting points -exec is checked with.
const maxFindStarts = 16

// findExec checks the command of find's -exec: with {} replaced by each
// starting point (and from -mindepth 1 by START/* and START/.*) when no
// test filtered the names, as the literal {} otherwise.
func (c *checker) findExec(cmd, starts []field, filtered, deep bool, in stdinSrc) {
	hasBraces := false
	for _, f := range cmd {
		hasBraces = hasBraces || strings.Contains(f.s, "{}")
	}
	if len(starts) == 0 {
		starts = []field{{s: "."}}
	}
	if filtered || !hasBraces || len(starts) > maxFindStarts {
		c.argv(append([]field(nil), cmd...), in)
		return
	}
	for _, st := range starts {
		found := []field{st}
		if deep {
			dir := strings.TrimSuffix(st.s, "/")
			found = []field{{s: dir + "/*", dyn: st.dyn, glob: true}, {s: dir + "/.*", dyn: st.dyn, glob: true}}
		}
		for _, f := range found {
			argv := make([]field, len(cmd))
			for i, w := range cmd {
				if strings.Contains(w.s, "{}") {
					w.s = strings.ReplaceAll(w.s, "{}", f.s)
					w.dyn, w.glob = w.dyn || f.dyn, f.glob
				}
				argv[i] = w
			}
			c.argv(argv, in)
			if c.done() {
				return
			}
		}
	}
}
