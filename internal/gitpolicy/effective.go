//go:build linux

package gitpolicy

import (
	"io/fs"
	"strings"

	"github.com/bashvisor/bashvisor/internal/layer"
)

// A repository's effective configuration is its config, config.worktree
// and every file they include (include.path and includeIf.*.path, all
// conditions taken as true), also files in a working tree
// (include.path = ../.gitconfig). What it names as code is protected:
// included files like the config itself, the core.hooksPath directory
// like hooks/, core.attributesFile, and, when it defines a filter, diff
// or merge driver, the attribute files that select drivers.

// maxIncludes bounds the files of one effective configuration.
const maxIncludes = 32

// code is what the effective configurations around a change set name
// as code.
type code struct {
	configs    map[string]bool // included files and attribute files of core.attributesFile
	hooks      []string        // core.hooksPath directories
	attributes []string        // working trees whose .gitattributes select configured drivers
	relHooks   []string        // the user's relative core.hooksPath: below every working tree
	programs   []string        // files program-valued keys name (programs.go)
	relProgs   []string        // the user's relative program files: below every working tree
	drivers    bool            // the user's configuration defines drivers
	ways       map[string]bool // symlinks the resolved paths go through (codeResolved's only)
}

// repoConfig is what one repository's effective configuration names
// (gitdir, whose working tree is wt: where git runs its hooks).
func (k *checker) repoConfig(gitdir, wt string, c *code) {
	for _, h := range c.relHooks {
		c.hooks = append(c.hooks, rawPath(wt, h))
	}
	for _, p := range c.relProgs {
		c.addProgram(wt, p)
	}
	if c.drivers {
		c.attributes = append(c.attributes, wt)
	}
	for _, after := range []bool{false, true} {
		files := []string{gitdir + "/config", gitdir + "/config.worktree"}
		if b, err := k.v.ReadFile(gitdir+"/commondir", after, 4096); err == nil {
			// resolved where it is read (resolveIn), as git does
			files = append(files, rawPath(gitdir, strings.TrimSpace(string(b)))+"/config")
		}
		seen := map[string]bool{}
		for i := 0; i < len(files) && i < maxIncludes; i++ {
			f := files[i]
			rf := k.resolveIn(f, after) // as git opens it
			if seen[rf] {
				continue
			}
			seen[rf] = true
			b, err := k.v.ReadFile(rf, after, maxCheckedFile)
			if err != nil {
				continue
			}
			entries, _ := parseConfig(b)
			files = append(files, k.named(wt, f, entries, c)...)
		}
	}
}

// named records what the entries of the config file f (of the
// repository whose working tree is wt) name as code, and returns the
// files f includes.
func (k *checker) named(wt, f string, entries []configEntry, c *code) []string {
	var incs []string
	for _, e := range entries {
		abs, rel := k.user.programPaths(e)
		for _, p := range append(abs, rel...) {
			c.addProgram(wt, p)
		}
		switch {
		case (e.Section == "include" || e.Section == "includeif") && e.Key == "path":
			if p := k.user.resolve(dirName(f), e.Value); p != "" {
				incs = append(incs, p)
				c.configs[p] = true
			}
		case e.Section == "core" && e.Sub == "" && e.Key == "hookspath":
			if p := k.user.resolve(wt, e.Value); p != "" {
				c.hooks = append(c.hooks, p)
			}
		case e.Section == "core" && e.Sub == "" && e.Key == "attributesfile":
			if p := k.user.resolve(wt, e.Value); p != "" {
				c.configs[p] = true
			}
		case e.Sub != "" && driverKey(e.Section, e.Key):
			c.attributes = append(c.attributes, wt)
		}
	}
	return incs
}

// driverKey reports whether section.*.key defines a driver that runs a
// program, which .gitattributes selects.
func driverKey(section, key string) bool {
	switch section + "." + key {
	case "filter.clean", "filter.smudge", "filter.process", "diff.command", "diff.textconv", "merge.driver":
		return true
	}
	return false
}

// repositories finds the repositories git would use around dir: at
// dir and each directory above it, a .git (directory, or a gitdir:
// file) or the directory itself as a git directory. Up to root every
// one counts (the command may have made or removed any of them); above
// it, as git's discovery does, the first one found (a repository that
// encloses the layer's roots has its say on what in them is code).
func (k *checker) repositories(dir, root string) {
	for d := dir; ; d = dirName(d) {
		if k.seenDirs[d] {
			return
		}
		k.seenDirs[d] = true
		found := false
		for _, after := range []bool{false, true} {
			if !k.isDir(d, after) || !k.exists(d+"/.git", after) {
				continue
			}
			if g := k.gitLink(d+"/.git", after); g != "" {
				found = true
				if !k.repos[g] {
					k.repos[g] = true
					k.repoConfig(g, d, k.code)
				}
			}
		}
		if g := k.isGitDir(d); g[0] || g[1] {
			found = true
			if !k.repos[d] {
				k.repos[d] = true
				k.repoConfig(d, dirName(d), k.code)
			}
		}
		if d == "/" || (found && len(d) <= len(root)) {
			return
		}
	}
}

// gitLink returns the git directory that p (a .git) names: p itself
// when it is a directory, the target of a "gitdir:" file, or "". Git
// follows a .git that is a symlink: it names the directory or the
// gitdir: file the kernel resolves it to (TestDotGitSymlink).
func (k *checker) gitLink(p string, after bool) string {
	at := p // where a gitdir: file is read
	fi, err := k.v.Lstat(p, after)
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		q, ok := k.resolvePath(p, after)
		if !ok {
			return ""
		}
		at = q
		fi, err = k.v.Lstat(at, after)
	}
	switch {
	case err != nil:
		return ""
	case fi.IsDir():
		return at
	case !fi.Mode().IsRegular():
		return ""
	}
	b, err := k.v.ReadFile(at, after, 4096)
	if err != nil {
		return ""
	}
	d, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok || d == "" {
		return ""
	}
	// Git takes the real path of what it names (relative to the .git
	// file's directory): a .. after a symlink leaves the symlink's
	// target, not the symlink's directory.
	return k.resolveIn(rawPath(dirName(p), d), after)
}

// codeFile judges a change to a file that an effective configuration
// names as code.
func (k *checker) codeFile(c layer.Change) verdict {
	p := c.Path
	r := k.codeResolved()
	link := c.Kind != layer.Deleted && c.Mode&fs.ModeSymlink != 0
	for _, h := range r.hooks {
		if p == h || strings.HasPrefix(p, h+"/") {
			return refuse(Hooks, "a hook in the core.hooksPath directory (a program git runs)")
		}
		if link && strings.HasPrefix(h, p+"/") {
			return refuse(Hooks, "a symlink on the way to the core.hooksPath directory (it moves where git finds hooks)")
		}
	}
	for _, h := range r.programs {
		if p == h || strings.HasPrefix(p, h+"/") {
			return refuse(Config, "a program the configuration names (core.fsmonitor, core.pager, an alias, a driver, ...)")
		}
		if link && strings.HasPrefix(h, p+"/") {
			return refuse(Config, "a symlink on the way to a program the configuration names (it moves where git finds the program)")
		}
	}
	if r.ways[p] && c.Kind != layer.Deleted {
		return refuse(Config, "a symlink the path of a hook, a program or an included file goes through (it moves where git finds it)")
	}
	if r.configs[p] {
		return k.configFileChange(p, c.Kind, c.Mode, "a file the repository's configuration includes")
	}
	if link {
		for f := range r.configs {
			if strings.HasPrefix(f, p+"/") {
				return refuse(Config, "a symlink on the way to a file the configuration includes (it moves where git reads configuration)")
			}
		}
	}
	if isGitattributes(baseName(p)) {
		for _, wt := range k.code.attributes {
			if strings.HasPrefix(p, wt+"/") {
				return refuse(Config, ".gitattributes selects drivers (programs) the repository's configuration defines")
			}
		}
	}
	return allowed
}

func isGitattributes(name string) bool {
	n := strings.TrimRight(strings.ToLower(stripHFSIgnorable(name)), ". ")
	return n == ".gitattributes" || strings.HasPrefix(n, "gi7d29~")
}
