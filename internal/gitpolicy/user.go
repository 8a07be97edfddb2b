//go:build linux

package gitpolicy

import (
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
)

// What the user's git reads besides the repositories around a change:
// the system and global configuration files and the variables its
// environment sets, and the repositories above the layer's roots.
// These lie outside the layer (the command cannot change them, unless
// a root holds them: then a change of one is judged like a repository's
// configuration), but they decide what is code inside it: a global
// core.hooksPath = .githooks makes every repository's .githooks/ hooks,
// a global include.path or an enclosing repository's configuration can
// name a workspace file, and a driver defined globally makes every
// working tree's .gitattributes select programs.

// systemConfig is git's system configuration file (its prefix /usr).
var systemConfig = "/etc/gitconfig"

// userConfig is where the user's git finds its configuration outside
// the repositories, for an environment.
type userConfig struct {
	home  string
	files []string // system and global files, in git's order
	// attributes is the default attributes file
	// ($XDG_CONFIG_HOME/git/attributes).
	attributes string
	entries    []configEntry // GIT_CONFIG_COUNT's KEY_n and VALUE_n, GIT_CONFIG_PARAMETERS
}

// userConfigOf finds the user's configuration for env as git does
// (config.c): GIT_CONFIG_SYSTEM or /etc/gitconfig unless
// GIT_CONFIG_NOSYSTEM; GIT_CONFIG_GLOBAL, or $XDG_CONFIG_HOME/git/config
// (default ~/.config/git/config) and ~/.gitconfig; and the variables
// GIT_CONFIG_COUNT and GIT_CONFIG_PARAMETERS set (envEntries).
func userConfigOf(env []string) *userConfig {
	// The first of duplicated variables, as getenv(3) gives git.
	get := func(k string) string {
		for _, kv := range env {
			if name, val, ok := strings.Cut(kv, "="); ok && name == k {
				return val
			}
		}
		return ""
	}
	u := &userConfig{home: get("HOME")}
	// A spelling git dies on reads the system file too (more than git).
	if skip, ok := gitBool(get("GIT_CONFIG_NOSYSTEM")); !ok || !skip {
		if s := get("GIT_CONFIG_SYSTEM"); s != "" {
			u.files = append(u.files, s)
		} else {
			u.files = append(u.files, systemConfig)
		}
	}
	xdg := get("XDG_CONFIG_HOME")
	if xdg == "" && u.home != "" {
		xdg = u.home + "/.config"
	}
	if xdg != "" {
		u.attributes = filepath.Clean(xdg + "/git/attributes")
	}
	switch g := get("GIT_CONFIG_GLOBAL"); {
	case g != "":
		u.files = append(u.files, g)
	default:
		if xdg != "" {
			u.files = append(u.files, xdg+"/git/config")
		}
		if u.home != "" {
			u.files = append(u.files, u.home+"/.gitconfig")
		}
	}
	for i := range u.files {
		u.files[i] = u.resolve("/", u.files[i])
	}
	u.entries = envEntries(env, get)
	return u
}

// resolve makes the path p of a config file absolute: relative to dir,
// ~/ to the user's home (HOME), ~name/ to name's (os/user); "" when it
// cannot be (no HOME, no such user). Its .. components are kept (see
// rawPath): the kernel resolves them after the symlinks before them.
func (u *userConfig) resolve(dir, p string) string {
	switch {
	case p == "":
		return ""
	case p == "~" || strings.HasPrefix(p, "~/"):
		if u.home == "" {
			return ""
		}
		return rawPath(u.home, strings.TrimPrefix(p[1:], "/"))
	case strings.HasPrefix(p, "~"):
		name, rest, _ := strings.Cut(p[1:], "/")
		h, err := user.Lookup(name)
		if err != nil || h.HomeDir == "" {
			return ""
		}
		return rawPath(h.HomeDir, rest)
	}
	return rawPath(dir, p)
}

// global reads the user's configuration files (before and after the
// command: a root may hold them) and what they include, and records
// what they name as code: the files themselves and their includes like
// a configuration, absolute core.hooksPath directories like hooks,
// relative ones for every repository (git runs hooks in its working
// tree), and drivers for every working tree's .gitattributes.
func (k *checker) global() {
	u := k.user
	if u.attributes != "" {
		k.code.configs[u.attributes] = true
	}
	// Includes named in the environment (absolute: git refuses relative
	// ones there) are read like the files'.
	incs := k.globalNamed("", u.entries)
	for _, after := range []bool{false, true} {
		files := append(slices.Clone(u.files), incs...)
		seen := map[string]bool{}
		for i := 0; i < len(files) && i < maxIncludes; i++ {
			f := files[i]
			k.code.configs[f] = true
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
			files = append(files, k.globalNamed(dirName(f), entries)...)
		}
	}
}

// globalNamed records what the user's configuration entries (of a file
// in dir) name as code and returns the files they include.
func (k *checker) globalNamed(dir string, entries []configEntry) []string {
	var incs []string
	for _, e := range entries {
		abs, rel := k.user.programPaths(e)
		for _, p := range abs {
			k.code.addProgram("/", p)
		}
		k.code.relProgs = append(k.code.relProgs, rel...)
		switch {
		case (e.Section == "include" || e.Section == "includeif") && e.Key == "path":
			if p := k.user.resolve(dir, e.Value); p != "" && (dir != "" || filepath.IsAbs(p)) {
				incs = append(incs, p)
				k.code.configs[p] = true
			}
		case e.Section == "core" && e.Sub == "" && e.Key == "hookspath":
			if e.Value != "" && !filepath.IsAbs(e.Value) && !strings.HasPrefix(e.Value, "~") {
				k.code.relHooks = append(k.code.relHooks, e.Value)
			} else if p := k.user.resolve("/", e.Value); p != "" {
				k.code.hooks = append(k.code.hooks, p)
			}
		case e.Section == "core" && e.Sub == "" && e.Key == "attributesfile":
			if p := k.user.resolve("/", e.Value); p != "" {
				k.code.configs[p] = true
			}
		case e.Sub != "" && driverKey(e.Section, e.Key):
			k.code.drivers = true
		}
	}
	return incs
}

// wide shows the files outside the layer's roots as they are on disk,
// the same before and after the command (which cannot change them):
// the user's configuration and the repositories above the roots.
type wide struct {
	View
	roots []string
}

func (w wide) inRoots(p string) bool {
	for _, r := range w.roots {
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

func (w wide) Lstat(path string, after bool) (fs.FileInfo, error) {
	if w.inRoots(path) {
		return w.View.Lstat(path, after)
	}
	return os.Lstat(path)
}

func (w wide) ReadFile(path string, after bool, limit int64) ([]byte, error) {
	if w.inRoots(path) {
		return w.View.ReadFile(path, after, limit)
	}
	f, err := w.Open(path, after)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

func (w wide) Open(path string, after bool) (io.ReadCloser, error) {
	if w.inRoots(path) {
		return w.View.Open(path, after)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrInvalid}
	}
	return f, nil
}

func (w wide) Readlink(path string, after bool) (string, error) {
	if w.inRoots(path) {
		return w.View.Readlink(path, after)
	}
	return os.Readlink(path)
}

func (w wide) ReadDir(path string, after bool) ([]string, error) {
	if w.inRoots(path) {
		return w.View.ReadDir(path, after)
	}
	entries, err := os.ReadDir(path)
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, err
}
