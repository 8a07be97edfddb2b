package cli

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/bashvisor/bashvisor/config"
)

// The user's caches are found by the tools' own rules rather than by
// asking the tools (go env, npm config get cache): a child process per
// start cost up to 700 ms (npm's). What the rules read is the
// environment, the files the tools read (Go's per-user env file and
// $GOROOT/go.env, npm's .npmrc files) and the working directory; what
// they do not follow is listed at each function.

// userCaches finds this user's Go, npm and pip caches as `go env GOCACHE
// GOMODCACHE`, `npm config get cache` and `pip cache dir` run in dir
// would name them: those that exist, and those the tool, found on PATH,
// would make (the sandbox makes them, empty).
func userCaches(dir string) config.BaseCaches {
	e := newToolEnv(os.Environ(), dir)
	build, mod := e.goCaches()
	installed := func(names ...string) func() bool {
		return func() bool {
			return slices.ContainsFunc(names, func(n string) bool { return e.lookPath(n) != "" })
		}
	}
	goCmd := installed("go")
	return config.BaseCaches{GoBuild: cacheDir(build, goCmd), GoMod: cacheDir(mod, goCmd), Npm: cacheDir(e.npmCache(), installed("npm")), Pip: cacheDir(e.pipCache(), installed("pip", "pip3"))}
}

// cacheDir returns dir if it is an absolute path to a directory, or to
// nothing yet when the tool is installed (asked only then: most caches
// exist, and each question walks PATH); else "".
func cacheDir(dir string, installed func() bool) string {
	if !filepath.IsAbs(dir) {
		return ""
	}
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() || errors.Is(err, fs.ErrNotExist) && installed() {
		return dir
	}
	return ""
}

// toolEnv is what the rules read besides files: an environment (as
// os.Environ has it) and the working directory.
type toolEnv struct {
	vars  map[string]string
	dir   string
	found map[string]string // lookPath's answers
}

func newToolEnv(environ []string, dir string) toolEnv {
	e := toolEnv{vars: make(map[string]string, len(environ)), dir: dir, found: map[string]string{}}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			e.vars[k] = v
		}
	}
	return e
}

func (e toolEnv) get(key string) string { return e.vars[key] }

// lookPath finds name in the environment's PATH and resolves symbolic
// links, as the tools see their own executable; "" if absent. Each name
// is looked up once.
func (e toolEnv) lookPath(name string) string {
	if p, ok := e.found[name]; ok {
		return p
	}
	p := e.searchPath(name)
	e.found[name] = p
	return p
}

func (e toolEnv) searchPath(name string) string {
	for _, d := range filepath.SplitList(e.get("PATH")) {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				return r
			}
			return p
		}
	}
	return ""
}

// userDir is os.UserCacheDir or os.UserConfigDir on Linux for the
// environment: $xdg when set (absolute), else $HOME/sub; "" when neither.
func (e toolEnv) userDir(xdg, sub string) string {
	if d := e.get(xdg); d != "" {
		if !filepath.IsAbs(d) {
			return ""
		}
		return d
	}
	if h := e.get("HOME"); h != "" {
		return filepath.Join(h, sub)
	}
	return ""
}

// goCaches returns what `go env GOCACHE GOMODCACHE` prints. A variable is
// taken from the environment (when not empty), else from the per-user env
// file `go env -w` writes ($GOENV, default os.UserConfigDir()/go/env;
// GOENV=off: none), else from $GOROOT/go.env. Not followed: a GOROOT
// equal to $HOME/go (go then has no default GOPATH).
func (e toolEnv) goCaches() (build, mod string) {
	envFile := e.get("GOENV")
	if envFile == "" {
		if d := e.userDir("XDG_CONFIG_HOME", ".config"); d != "" {
			envFile = filepath.Join(d, "go", "env")
		}
	}
	file := map[string]string{}
	if envFile != "off" && envFile != "" {
		readGoEnv(file, envFile, false)
	}
	get := func(key string) string {
		if v := e.get(key); v != "" {
			return v
		}
		return file[key]
	}
	goroot := get("GOROOT")
	if goroot == "" {
		if p := e.lookPath("go"); p != "" {
			goroot = filepath.Dir(filepath.Dir(p))
		}
	}
	if goroot != "" {
		readGoEnv(file, filepath.Join(goroot, "go.env"), true)
	}

	build = get("GOCACHE")
	if build == "" {
		build = "off"
		if d := e.userDir("XDG_CACHE_HOME", ".cache"); d != "" {
			build = filepath.Join(d, "go-build")
		}
	}
	mod = get("GOMODCACHE")
	if mod == "" {
		gopath := get("GOPATH")
		if gopath == "" && e.get("HOME") != "" {
			gopath = filepath.Join(e.get("HOME"), "go")
		}
		if list := filepath.SplitList(gopath); len(list) > 0 && list[0] != "" {
			mod = filepath.Join(list[0], "pkg", "mod")
		}
	}
	return build, mod
}

// readGoEnv adds the KEY=VALUE lines of a Go env file to m (cmd/go's
// rules: a line must start with an upper-case letter and hold '=';
// values are taken verbatim). keep: do not override keys already in m
// ($GOROOT/go.env is below the per-user file).
func readGoEnv(m map[string]string, file string, keep bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return
	}
	for line := range bytes.Lines(data) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		k, v, ok := bytes.Cut(line, []byte("="))
		if !ok || len(line) == 0 || line[0] < 'A' || line[0] > 'Z' {
			continue
		}
		if _, have := m[string(k)]; have && keep {
			continue
		}
		m[string(k)] = string(v)
	}
}

// npmCache returns what `npm config get cache` prints, by npm's layers
// (highest first): npm_config_* variables (any case, empty ones
// ignored), the project's .npmrc (in the nearest directory up from dir
// holding package.json or node_modules, else dir), the user's
// ($NPM_CONFIG_USERCONFIG, default ~/.npmrc), the global one
// ($PREFIX/etc/npmrc: PREFIX from the layers above or the environment,
// else node's install prefix), npm's builtin npmrc, and the default
// ~/.npm. Values get ${VAR} expansion, ~/ and relative paths resolve
// against $HOME and dir. Not followed: npm workspaces (whose root's
// .npmrc is the project's) and values in ini sections.
func (e toolEnv) npmCache() string {
	home := e.get("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	env := map[string]string{}
	for k, v := range e.vars {
		if len(k) > len("npm_config_") && strings.EqualFold(k[:len("npm_config_")], "npm_config_") && v != "" {
			key := k[len("npm_config_"):]
			if !strings.HasPrefix(key, "//") {
				key = strings.ToLower(key[:1] + strings.ReplaceAll(key[1:], "_", "-"))
			}
			env[key] = v
		}
	}
	path := func(v string) string {
		v = expandNpmEnv(strings.TrimSpace(v), e.vars)
		if rest, ok := strings.CutPrefix(v, "~/"); ok && home != "" {
			return filepath.Join(home, rest)
		}
		if !filepath.IsAbs(v) {
			return filepath.Join(e.dir, v)
		}
		return filepath.Clean(v)
	}
	npmRoot := ""
	if p := e.lookPath("npm"); p != "" {
		npmRoot = filepath.Dir(filepath.Dir(p)) // …/node_modules/npm/bin/npm-cli.js
	}
	builtin := readNpmrc(filepath.Join(npmRoot, "npmrc"), npmRoot != "")
	project := readNpmrc(filepath.Join(npmPackageRoot(e.dir), ".npmrc"), true)
	first := func(key string, layers ...map[string]string) (string, bool) {
		for _, l := range layers {
			if v, ok := l[key]; ok {
				return path(v), true
			}
		}
		return "", false
	}
	userFile, ok := first("userconfig", env, project, builtin)
	if !ok {
		userFile = filepath.Join(home, ".npmrc")
	}
	if projectFile := filepath.Join(npmPackageRoot(e.dir), ".npmrc"); projectFile == userFile {
		project = nil // npm skips a project file that is the user's
	}
	user := readNpmrc(userFile, true)
	globalFile, ok := first("globalconfig", env, project, user, builtin)
	if !ok {
		prefix, ok := first("prefix", env, user, builtin)
		if !ok {
			prefix = e.get("PREFIX")
			if prefix == "" {
				if node := e.lookPath("node"); node != "" {
					prefix = filepath.Dir(filepath.Dir(node))
					if d := e.get("DESTDIR"); d != "" {
						prefix = filepath.Join(d, prefix)
					}
				}
			}
		}
		globalFile = filepath.Join(prefix, "etc", "npmrc")
	}
	global := readNpmrc(globalFile, true)
	if c, ok := first("cache", env, project, user, global, builtin); ok {
		return c
	}
	return path("~/.npm")
}

// npmPackageRoot is npm's local prefix for dir: the nearest directory up
// from it with a package.json or a node_modules, else dir.
func npmPackageRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		for _, name := range []string{"package.json", "node_modules"} {
			if fi, err := os.Stat(filepath.Join(d, name)); err == nil && (name == "package.json" || fi.IsDir()) {
				return d
			}
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

// readNpmrc reads the top-level `key = value` lines of an npmrc (ini:
// `;` and `#` comments, quoted values); nil when it cannot be read.
func readNpmrc(file string, ok bool) map[string]string {
	if !ok {
		return nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == ';' || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			break // a section: its keys are not top-level settings
		}
		k, v, _ := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		m[k] = v
	}
	return m
}

// expandNpmEnv replaces ${VAR} (and ${VAR?}, empty when unset) as npm
// does; an odd number of backslashes before it keeps it literal.
func expandNpmEnv(s string, vars map[string]string) string {
	if !strings.Contains(s, "${") {
		return s // the usual case: no expression to compile
	}
	npmEnvExpr := regexp.MustCompile(`(\\*)\$\{([^${}?]+)(\?)?\}`)
	return npmEnvExpr.ReplaceAllStringFunc(s, func(m string) string {
		sub := npmEnvExpr.FindStringSubmatch(m)
		esc, name, opt := sub[1], sub[2], sub[3]
		if len(esc)%2 == 1 {
			return m[(len(esc)+1)/2:]
		}
		val, ok := vars[name]
		if !ok {
			val = "${" + name + "}"
			if opt == "?" {
				val = ""
			}
		}
		return esc[len(esc)/2:] + val
	})
}

// pipCache returns what `pip cache dir` prints: $PIP_CACHE_DIR (when not
// empty), else cache-dir in the [global] section of the last config file
// that sets it ($PIP_CONFIG_FILE, else /etc/xdg/pip/pip.conf,
// /etc/pip.conf, ~/.pip/pip.conf, os.UserConfigDir()/pip/pip.conf, and
// $VIRTUAL_ENV/pip.conf, later ones first), else os.UserCacheDir()/pip.
// Not followed: the site file of a Python not in a virtual environment
// (sys.prefix/pip.conf) and [install]'s cache-dir.
func (e toolEnv) pipCache() string {
	if v := e.get("PIP_CACHE_DIR"); v != "" {
		return v
	}
	files := []string{"/etc/xdg/pip/pip.conf", "/etc/pip.conf"}
	if h := e.get("HOME"); h != "" {
		files = append(files, filepath.Join(h, ".pip", "pip.conf"))
	}
	if d := e.userDir("XDG_CONFIG_HOME", ".config"); d != "" {
		files = append(files, filepath.Join(d, "pip", "pip.conf"))
	}
	if v := e.get("VIRTUAL_ENV"); v != "" {
		files = append(files, filepath.Join(v, "pip.conf"))
	}
	if f := e.get("PIP_CONFIG_FILE"); f != "" {
		files = []string{f}
	}
	dir := ""
	for _, f := range files {
		if v := readIniKey(f, "global", "cache-dir"); v != "" {
			dir = v
		}
	}
	if dir != "" {
		if rest, ok := strings.CutPrefix(dir, "~/"); ok && e.get("HOME") != "" {
			return filepath.Join(e.get("HOME"), rest)
		}
		return os.Expand(dir, e.get)
	}
	if d := e.userDir("XDG_CACHE_HOME", ".cache"); d != "" {
		return filepath.Join(d, "pip")
	}
	return ""
}

// readIniKey returns key's value in section of an ini file (Python's
// configparser: `key = value` or `key: value`, `#` and `;` comments; the
// key's _ and - alike), "" when absent.
func readIniKey(file, section, key string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	in, val := false, ""
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			in = strings.TrimSpace(strings.Trim(line, "[]")) == section
		case in:
			k, v, ok := strings.Cut(line, "=")
			if i := strings.IndexByte(line, ':'); i >= 0 && (!ok || i < len(k)) {
				k, v, ok = line[:i], line[i+1:], true
			}
			if ok && strings.ReplaceAll(strings.TrimSpace(k), "_", "-") == key {
				val = strings.TrimSpace(v)
			}
		}
	}
	return val
}
