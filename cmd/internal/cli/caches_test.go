package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// cacheCase is one environment the cache rules are checked in: the
// variables (besides PATH and HOME) and files to write first (paths
// relative to the case's temporary root, contents with ROOT replaced by
// it), and the working directory.
type cacheCase struct {
	name  string
	env   []string
	files map[string]string
	dir   string
}

// setup makes the case's root, home and files and returns the
// environment and working directory.
func (c cacheCase) setup(t *testing.T) (env []string, dir string) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	for _, d := range []string{home, filepath.Join(root, c.dir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range c.files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(body, "ROOT", root)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
	config := filepath.Join(home, ".config")
	for _, kv := range c.env {
		kv = strings.ReplaceAll(kv, "ROOT", root)
		if v, ok := strings.CutPrefix(kv, "XDG_CONFIG_HOME="); ok {
			config = v
		}
		env = append(env, kv)
	}
	// Go's telemetry off in this HOME: otherwise go writes counters there
	// (from a child that outlives it), racing the temporary directory's
	// removal.
	mode := filepath.Join(config, "go", "telemetry", "mode")
	if err := os.MkdirAll(filepath.Dir(mode), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mode, []byte("off"), 0o644); err != nil {
		t.Fatal(err)
	}
	return env, filepath.Join(root, c.dir)
}

// tool runs a tool in the case's environment and returns its output's
// lines.
func tool(t *testing.T, env []string, dir, name string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env, cmd.Dir = env, dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %q: %v", name, args, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestGoCachesAsGoEnv: the Go caches found without running go are what
// `go env GOCACHE GOMODCACHE` prints, with the variables set, with them
// in the file `go env -w` writes (and the environment over the file),
// with XDG directories, GOCACHE=off, GOENV elsewhere or off.
func TestGoCachesAsGoEnv(t *testing.T) {
	goCmd := testenv.NeedsTool(t, "go")[0]
	goenv := "home/.config/go/env"
	for _, c := range []cacheCase{
		{name: "defaults"},
		{name: "variables", env: []string{"GOCACHE=ROOT/gc", "GOMODCACHE=ROOT/gm"}},
		{name: "GOPATH list", env: []string{"GOPATH=ROOT/a" + string(filepath.ListSeparator) + "ROOT/b"}},
		{name: "env file", files: map[string]string{goenv: "GOCACHE=ROOT/file-gc\nGOPATH=ROOT/file-gp\n"}},
		{name: "env over file", env: []string{"GOPATH=ROOT/env-gp"}, files: map[string]string{goenv: "GOCACHE=ROOT/file-gc\nGOPATH=ROOT/file-gp\nGOMODCACHE=ROOT/file-gm\n"}},
		{name: "empty variable falls to the file", env: []string{"GOCACHE="}, files: map[string]string{goenv: "GOCACHE=ROOT/file-gc\n"}},
		{name: "XDG", env: []string{"XDG_CACHE_HOME=ROOT/xc", "XDG_CONFIG_HOME=ROOT/xg"}, files: map[string]string{"xg/go/env": "GOMODCACHE=ROOT/xdg-gm\n"}},
		{name: "GOCACHE off", env: []string{"GOCACHE=off"}},
		{name: "GOENV elsewhere", env: []string{"GOENV=ROOT/my-env"}, files: map[string]string{"my-env": "GOCACHE=ROOT/mine\n", goenv: "GOCACHE=ROOT/not-mine\n"}},
		{name: "GOENV off", env: []string{"GOENV=off"}, files: map[string]string{goenv: "GOCACHE=ROOT/not-read\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, dir := c.setup(t)
			want := tool(t, env, dir, goCmd, "env", "GOCACHE", "GOMODCACHE")
			build, mod := newToolEnv(env, dir).goCaches()
			if len(want) != 2 || build != want[0] || mod != want[1] {
				t.Errorf("found GOCACHE %q GOMODCACHE %q; go env says %q", build, mod, want)
			}
		})
	}
	// A file written by go env -w itself.
	env, dir := cacheCase{}.setup(t)
	tool(t, env, dir, goCmd, "env", "-w", "GOCACHE="+filepath.Join(dir, "w-gc"), "GOPATH="+filepath.Join(dir, "w-gp"))
	want := tool(t, env, dir, goCmd, "env", "GOCACHE", "GOMODCACHE")
	if build, mod := newToolEnv(env, dir).goCaches(); build != want[0] || mod != want[1] || !strings.HasPrefix(build, dir) {
		t.Errorf("after go env -w: found %q %q; go env says %q", build, mod, want)
	}
}

// TestNpmCacheAsNpmConfig: the npm cache found without running npm is
// what `npm config get cache` prints, with the variable in either case
// (empty: ignored), relative, in the user's, the project's (from a
// subdirectory of the package, with ${VAR}) and the global npmrc, with
// the user's file moved and the prefix set.
func TestNpmCacheAsNpmConfig(t *testing.T) {
	npm := testenv.NeedsTool(t, "npm")[0]
	for _, c := range []cacheCase{
		{name: "default"},
		{name: "variable", env: []string{"npm_config_cache=ROOT/n1"}},
		{name: "upper-case relative variable", env: []string{"NPM_CONFIG_CACHE=rel/c"}, dir: "work"},
		{name: "user npmrc", files: map[string]string{"home/.npmrc": "; comment\ncache = ~/from-user\n"}},
		{name: "empty variable ignored", env: []string{"npm_config_cache="}, files: map[string]string{"home/.npmrc": "cache=ROOT/user-c\n"}},
		{name: "project npmrc", env: []string{"MYVAR=ROOT/v"}, dir: "pkg/sub/dir",
			files: map[string]string{"pkg/package.json": "{}", "pkg/.npmrc": "cache=${MYVAR}/proj\n", "home/.npmrc": "cache=ROOT/user-c\n"}},
		{name: "variable over project", env: []string{"npm_config_cache=ROOT/env-c"}, dir: "pkg",
			files: map[string]string{"pkg/package.json": "{}", "pkg/.npmrc": "cache=ROOT/proj\n"}},
		{name: "no package: the directory's own npmrc", dir: "loose", files: map[string]string{"loose/.npmrc": "cache=\"ROOT/loose-c\"\n"}},
		{name: "userconfig moved", env: []string{"NPM_CONFIG_USERCONFIG=ROOT/elsewhere"},
			files: map[string]string{"elsewhere": "cache=ROOT/moved\n", "home/.npmrc": "cache=ROOT/not-read\n"}},
		{name: "global via PREFIX", env: []string{"PREFIX=ROOT/pfx"}, files: map[string]string{"pfx/etc/npmrc": "cache=ROOT/global-c\n"}},
		{name: "global via the user's prefix", files: map[string]string{"home/.npmrc": "prefix=ROOT/pfx2\n", "pfx2/etc/npmrc": "cache=ROOT/global2\n"}},
		{name: "user over global", env: []string{"PREFIX=ROOT/pfx"},
			files: map[string]string{"pfx/etc/npmrc": "cache=ROOT/global-c\n", "home/.npmrc": "cache=ROOT/user-c\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, dir := c.setup(t)
			want := tool(t, env, dir, npm, "config", "get", "cache")
			if got := newToolEnv(env, dir).npmCache(); len(want) != 1 || got != want[0] {
				t.Errorf("found %q; npm config get cache says %q", got, want)
			}
		})
	}
}

// TestPipCacheAsPipCacheDir: the pip cache found without running pip is
// what `pip cache dir` prints, by default, with PIP_CACHE_DIR, XDG
// directories, the user's config files (the later over the earlier),
// PIP_CONFIG_FILE and a virtual environment's file.
func TestPipCacheAsPipCacheDir(t *testing.T) {
	py := testenv.NeedsTool(t, "python3")[0]
	// The interpreter itself: a version manager's shim may need the real
	// HOME.
	out, err := exec.Command(py, "-c", "import sys, pip; print(sys.executable)").Output()
	if err != nil {
		testenv.Need(t, testenv.Tools, fmt.Errorf("python3 with pip: %w", err))
	}
	py = strings.TrimSpace(string(out))
	for _, c := range []cacheCase{
		{name: "default"},
		{name: "variable", env: []string{"PIP_CACHE_DIR=ROOT/pc"}},
		{name: "XDG", env: []string{"XDG_CACHE_HOME=ROOT/xc", "XDG_CONFIG_HOME=ROOT/xg"}, files: map[string]string{"xg/pip/pip.conf": "[global]\ncache-dir = ROOT/xdg-conf\n"}},
		{name: "user files", files: map[string]string{"home/.pip/pip.conf": "[global]\ncache-dir = ROOT/legacy\n",
			"home/.config/pip/pip.conf": "# c\n[install]\ncache-dir = ROOT/not-global\n[global]\ncache_dir: ROOT/new\n"}},
		{name: "legacy file alone", files: map[string]string{"home/.pip/pip.conf": "[global]\ncache-dir = ROOT/legacy\n"}},
		{name: "variable over file", env: []string{"PIP_CACHE_DIR=ROOT/env"}, files: map[string]string{"home/.config/pip/pip.conf": "[global]\ncache-dir = ROOT/file\n"}},
		{name: "PIP_CONFIG_FILE", env: []string{"PIP_CONFIG_FILE=ROOT/my.conf"}, files: map[string]string{"my.conf": "[global]\ncache-dir = ROOT/mine\n"}},
		{name: "virtual environment", env: []string{"VIRTUAL_ENV=ROOT/venv"}, files: map[string]string{"venv/pip.conf": "[global]\ncache-dir = ROOT/venv-c\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, dir := c.setup(t)
			py := py
			if c.name == "virtual environment" {
				// An activated one: its python's sys.prefix is $VIRTUAL_ENV.
				venv := strings.TrimPrefix(env[len(env)-1], "VIRTUAL_ENV=")
				tool(t, env, dir, py, "-m", "venv", "--without-pip", "--system-site-packages", venv)
				py = filepath.Join(venv, "bin", "python")
			}
			want := tool(t, env, dir, py, "-m", "pip", "cache", "dir")
			if got := newToolEnv(env, dir).pipCache(); len(want) != 1 || got != want[0] {
				t.Errorf("found %q; pip cache dir says %q", got, want)
			}
		})
	}
}

// TestUserCachesExist: existing absolute directories are bases, and
// missing ones of an installed tool (made when a sandbox starts); not a
// relative path, a file, or a missing one of a tool not on PATH.
func TestUserCachesExist(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	t.Setenv("GOCACHE", root)
	t.Setenv("GOMODCACHE", filepath.Join(root, "missing"))
	t.Setenv("npm_config_cache", filepath.Join(root, "missing-npm")) // npm is not on PATH
	t.Setenv("PIP_CACHE_DIR", filepath.Join(root, "file"))
	b := userCaches(root)
	if b.GoBuild != root || b.GoMod != filepath.Join(root, "missing") || b.Npm != "" || b.Pip != "" {
		t.Errorf("got %+v", b)
	}
	t.Setenv("GOCACHE", "relative")
	if b := userCaches(root); b.GoBuild != "" {
		t.Errorf("relative GOCACHE: got %+v", b)
	}
}

// TestCacheDirAsksOnlyForMissing: whether the tool is installed (a walk
// of PATH) is asked only about a cache that does not exist yet, which
// is kept only when the tool is there; an existing one is kept without
// asking, a relative path or a file never.
func TestCacheDirAsksOnlyForMissing(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(root, "missing")
	asked := 0
	tool := func(installed bool) func() bool {
		return func() bool { asked++; return installed }
	}
	for _, c := range []struct {
		dir       string
		installed bool
		want      string
		asks      int
	}{
		{root, false, root, 0},
		{file, true, "", 0},
		{"relative/dir", true, "", 0},
		{missing, true, missing, 1},
		{missing, false, "", 1},
	} {
		asked = 0
		if got := cacheDir(c.dir, tool(c.installed)); got != c.want || asked != c.asks {
			t.Errorf("cacheDir(%q, installed %v) = %q after %d questions, want %q after %d", c.dir, c.installed, got, asked, c.want, c.asks)
		}
	}
}
