package engine_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// A package build of a workspace (npm ci, pip install into a virtual
// environment) that the unrestricted run and the workspace-write run
// must leave byte for byte alike, where the user's next command finds
// it.
type packageBuild struct {
	dir     string               // the workspace: a git repository with its local index
	command string               // the build, offline
	out     string               // what it makes, relative to dir: removed before each run
	next    string               // the user's next command, run in dir
	want    string               // its output
	caches  func(*engine.Config) // the user's cache of the tool as the base
}

// packageBuilds are the builds the test and the benchmark run, by name.
var packageBuilds = []struct {
	name string
	make func(testing.TB) packageBuild
}{{"npm-ci", npmBuild}, {"pip-install", pipBuild}}

// The local npm packages: each has a few modules and one a bin and a
// postinstall script that writes into its package (as a native build
// does); later ones depend on earlier ones by version range.
const npmPackages = 24

// npmBuild writes a project whose package-lock.json pins npmPackages
// tarballs of its vendor/ (file: dependencies, with integrity hashes: no
// registry, npm ci --offline), the lock made by npm itself.
func npmBuild(t testing.TB) packageBuild {
	t.Helper()
	npm := testenv.NeedsTool(t, "npm", "node")[0]
	dir := repo(t)
	deps := map[string]string{}
	for i := range npmPackages {
		name := fmt.Sprintf("dep%02d", i)
		pkg := map[string]string{
			"index.js":     fmt.Sprintf("module.exports = { name: %q, parts: [require('./lib/a'), require('./lib/b')] };\n", name),
			"lib/a.js":     "module.exports = '" + strings.Repeat("a", 2000) + "';\n",
			"lib/b.js":     "module.exports = '" + strings.Repeat("b", 6000) + "';\n",
			"README.md":    "# " + name + "\n",
			"package.json": fmt.Sprintf(`{"name":%q,"version":"1.0.%d","main":"index.js","license":"MIT"}`, name, i),
		}
		if i > 0 {
			prev := fmt.Sprintf("dep%02d", i-1)
			pkg["package.json"] = fmt.Sprintf(`{"name":%q,"version":"1.0.%d","main":"index.js","license":"MIT","dependencies":{%q:"^1.0.%d"}}`, name, i, prev, i-1)
			pkg["index.js"] = fmt.Sprintf("module.exports = { name: %q, prev: require(%q).name };\n", name, prev)
		}
		if i == 3 {
			pkg["bin/cli.js"] = "#!/usr/bin/env node\nconsole.log(require('..').name);\n"
			pkg["package.json"] = fmt.Sprintf(`{"name":%q,"version":"1.0.%d","license":"MIT","bin":{"dep-cli":"bin/cli.js"},"scripts":{"postinstall":"node -e \"require('fs').writeFileSync('built.txt', 'built\\n')\""}}`, name, i)
		}
		writeTarball(t, filepath.Join(dir, "vendor", name+".tgz"), pkg)
		deps[name] = "file:vendor/" + name + ".tgz"
	}
	var list []string
	for name, spec := range deps {
		list = append(list, fmt.Sprintf("%q:%q", name, spec))
	}
	slices.Sort(list)
	writeFiles(t, dir, map[string]string{
		"package.json": `{"name":"app","version":"1.0.0","private":true,"dependencies":{` + strings.Join(list, ",") + "}}\n",
		".gitignore":   "node_modules/\n",
	})
	lock := exec.Command(npm, "install", "--package-lock-only", "--offline", "--no-audit", "--no-fund")
	lock.Dir = dir
	if out, err := lock.CombinedOutput(); err != nil {
		t.Fatalf("npm install --package-lock-only: %v\n%s", err, out)
	}
	gitFixture(t, dir, "add", "-A")
	gitFixture(t, dir, "commit", "-qm", "npm project")
	cache, err := exec.Command(npm, "config", "get", "cache").Output()
	if err != nil {
		t.Fatalf("npm config get cache: %v", err)
	}
	last := fmt.Sprintf("dep%02d", npmPackages-1)
	return packageBuild{dir: dir, out: "node_modules",
		command: "npm ci --offline --no-audit --no-fund",
		next:    `node -e 'console.log(require("` + last + `").prev)' && node_modules/.bin/dep-cli && cat node_modules/dep03/built.txt`,
		want:    fmt.Sprintf("dep%02d\ndep03\nbuilt\n", npmPackages-2),
		caches:  func(c *engine.Config) { c.Sandbox.BaseCaches.Npm = strings.TrimSpace(string(cache)) },
	}
}

// writeTarball writes an npm package tarball (package/ and the files).
func writeTarball(t testing.TB, path string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := slices.Sorted(maps.Keys(files))
	for _, name := range names {
		mode := int64(0o644)
		if strings.HasPrefix(name, "bin/") {
			mode = 0o755
		}
		body := files[name]
		hdr := &tar.Header{Name: "package/" + name, Mode: mode, Size: int64(len(body)), ModTime: time.Date(1985, 10, 26, 8, 15, 0, 0, time.UTC), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, filepath.Dir(path), map[string]string{filepath.Base(path): buf.String()})
}

// The local wheels: pkga needs pkgb, which needs pkgc; each has a few
// modules and pkga a console script.
var wheels = []struct{ name, requires string }{{"pkga", "pkgb"}, {"pkgb", "pkgc>=1.0"}, {"pkgc", ""}}

// pipBuild writes a project whose wheels/ is a local index (three wheels
// written here: a wheel is a zip of the package and its dist-info) and
// whose build makes a virtual environment, with pip, and installs pkga
// from the index into it.
func pipBuild(t testing.TB) packageBuild {
	t.Helper()
	python := testenv.NeedsTool(t, "python3")[0]
	if out, err := exec.Command(python, "-c", "import venv, ensurepip").CombinedOutput(); err != nil {
		testenv.Needf(t, testenv.Tools, false, "python3 with venv and ensurepip: %v\n%s", err, out)
	}
	dir := repo(t)
	for _, w := range wheels {
		files := map[string]string{
			w.name + "/__init__.py": "from . import core, util\nNAME = " + fmt.Sprintf("%q", w.name) + "\n",
			w.name + "/core.py":     "import json\n\n\ndef value():\n    return json.dumps({'v': " + fmt.Sprintf("%q", strings.Repeat("x", 3000)) + "})\n",
			w.name + "/util.py":     "def add(a, b):\n    return a + b\n",
		}
		meta := "Metadata-Version: 2.1\nName: " + w.name + "\nVersion: 1.0\n"
		if w.requires != "" {
			meta += "Requires-Dist: " + w.requires + "\n"
		}
		if w.name == "pkga" {
			files[w.name+"/cli.py"] = "def main():\n    import pkga, pkgb\n    print(pkga.NAME, pkgb.NAME)\n"
			files["pkga-1.0.dist-info/entry_points.txt"] = "[console_scripts]\npkga-cli = pkga.cli:main\n"
		}
		files[w.name+"-1.0.dist-info/METADATA"] = meta
		files[w.name+"-1.0.dist-info/WHEEL"] = "Wheel-Version: 1.0\nGenerator: bashvisor-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
		writeWheel(t, filepath.Join(dir, "wheels", w.name+"-1.0-py3-none-any.whl"), w.name+"-1.0.dist-info/RECORD", files)
	}
	writeFiles(t, dir, map[string]string{".gitignore": ".venv/\n"})
	gitFixture(t, dir, "add", "-A")
	gitFixture(t, dir, "commit", "-qm", "python project")
	var pipCache string
	if out, err := exec.Command(python, "-m", "pip", "cache", "dir").Output(); err == nil {
		pipCache = strings.TrimSpace(string(out))
	}
	return packageBuild{dir: dir, out: ".venv",
		command: "python3 -m venv .venv && .venv/bin/pip install -q --disable-pip-version-check --no-index --find-links wheels pkga",
		// python -v says "# …/__pycache__/X.pyc matches …/X.py" for each
		// module it loads from bytecode (rather than compiling it).
		next: `.venv/bin/python -c 'import pkga, pkgc; print(pkga.NAME, pkgc.util.add(1, 2))' && .venv/bin/pkga-cli && ` +
			`.venv/bin/python -v -c 'import pkga' 2>&1 | grep -c '/pkga/__pycache__/[a-z_]*\.cpython-[0-9]*\.pyc matches .*/site-packages/pkga/[a-z_]*\.py$'`,
		want: "pkga 3\npkga pkgb\n3\n", // __init__, core, util
		caches: func(c *engine.Config) {
			if fi, err := os.Stat(pipCache); err == nil && fi.IsDir() {
				c.Sandbox.BaseCaches.Pip = pipCache
			}
		},
	}
}

// writeWheel writes a wheel: the files and a RECORD of their hashes.
func writeWheel(t testing.TB, path, record string, files map[string]string) {
	t.Helper()
	var rec strings.Builder
	names := slices.Sorted(maps.Keys(files))
	for _, name := range names {
		sum := sha256.Sum256([]byte(files[name]))
		fmt.Fprintf(&rec, "%s,sha256=%s,%d\n", name, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[name]))
	}
	fmt.Fprintf(&rec, "%s,,\n", record)
	files[record] = rec.String()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range append(names, record) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: time.Date(1985, 10, 26, 8, 15, 0, 0, time.UTC)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(files[name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, filepath.Dir(path), map[string]string{filepath.Base(path): buf.String()})
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// treeEntry is what the comparison sees of a file: its type and
// permission bits, and its contents (a symbolic link's target; nothing
// for a directory). Times, owners and inode numbers are not compared.
type treeEntry struct {
	mode fs.FileMode
	data string
}

// snapshot reads the tree at dir/rel. The one thing two runs of the same
// build legitimately write differently, the same way unrestricted twice
// as unrestricted against sandboxed, is left out: the source's mtime a
// timestamp-based .pyc records (PEP 552: bytes 8-11 when the flags, bytes
// 4-7, are 0), which is when the build wrote the .py (pip and ensurepip
// do not keep the wheel's times). That the recorded time is the source's
// in the tree (the next import loads the .pyc rather than compiling the
// module again) is freshPyc's check.
func snapshot(t testing.TB, dir, rel string) map[string]treeEntry {
	t.Helper()
	tree := map[string]treeEntry{}
	err := filepath.WalkDir(filepath.Join(dir, rel), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		e := treeEntry{mode: fi.Mode()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			e.data, err = os.Readlink(path)
		case fi.Mode().IsRegular():
			var b []byte
			b, err = os.ReadFile(path)
			if strings.HasSuffix(path, ".pyc") && len(b) >= 16 && binary.LittleEndian.Uint32(b[4:8]) == 0 {
				b = slices.Concat(b[:8], []byte{0, 0, 0, 0}, b[12:])
			}
			e.data = string(b)
		}
		r, _ := filepath.Rel(dir, path)
		tree[r] = e
		return err
	})
	if err != nil {
		t.Fatalf("reading %s: %v", rel, err)
	}
	return tree
}

// sameTree fails the test at the first differences of the trees.
func sameTree(t testing.TB, what string, want, got map[string]treeEntry) {
	t.Helper()
	var diffs []string
	for _, p := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[p]
		switch w := want[p]; {
		case !ok:
			diffs = append(diffs, "missing "+p)
		case g.mode != w.mode:
			diffs = append(diffs, fmt.Sprintf("%s: mode %v, want %v", p, g.mode, w.mode))
		case g.data != w.data:
			diffs = append(diffs, fmt.Sprintf("%s: %d bytes differ from the %d unrestricted", p, len(g.data), len(w.data)))
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			diffs = append(diffs, "extra "+p)
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("%s: %d of %d paths differ from the unrestricted build's:\n%s", what, len(diffs), len(want), strings.Join(diffs[:min(len(diffs), 20)], "\n"))
	}
}

// freshPyc checks that every timestamp-based .pyc under dir/rel records
// its source's mtime (in seconds) and size as the tree has them, so that
// Python loads it rather than compiling the module again; it returns how
// many there are.
func freshPyc(t testing.TB, dir, rel string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(filepath.Join(dir, rel), func(path string, d fs.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(path, ".pyc") || filepath.Base(filepath.Dir(path)) != "__pycache__" {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil || len(b) < 16 || binary.LittleEndian.Uint32(b[4:8]) != 0 {
			return err
		}
		module, _, _ := strings.Cut(filepath.Base(path), ".")
		src, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(path)), module+".py"))
		if err != nil {
			return fmt.Errorf("the source of %s: %w", path, err)
		}
		if mtime, size := binary.LittleEndian.Uint32(b[8:12]), binary.LittleEndian.Uint32(b[12:16]); mtime != uint32(src.ModTime().Unix()) || size != uint32(src.Size()) {
			return fmt.Errorf("%s records mtime %d size %d, its source has %d %d: stale", path, mtime, size, src.ModTime().Unix(), src.Size())
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// buildTimes are the figures of one build: the engine's Run (wall), the
// command's processes' CPU time, and the build's own wall time in its
// shell (inside: without the sandbox's start and the layer's apply).
type buildTimes struct{ wall, cpu, inside time.Duration }

// buildRun runs b's build from scratch (its output removed first) in the
// call's profile and returns its times.
func buildRun(t testing.TB, e *engine.Engine, b packageBuild, tc engine.ToolContext) buildTimes {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(b.dir, b.out)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeSlow,
		Command: `s=$EPOCHREALTIME; ` + b.command + ` && echo "build took $s $EPOCHREALTIME"`})
	bt := buildTimes{wall: time.Since(start), cpu: time.Duration(r.Usage.CPUMS) * time.Millisecond}
	var from, to float64
	_, err := fmt.Sscanf(r.Output[max(0, strings.LastIndex(r.Output, "build took ")):], "build took %f %f", &from, &to)
	if r.Status != engine.StatusOK || r.Held != nil || len(r.Refused) > 0 || err != nil {
		t.Fatalf("%s in %s: %s held %+v refused %+v (%v)\n%s", b.command, profileName(tc), r.Status, r.Held, r.Refused, err, r.Output)
	}
	bt.inside = time.Duration((to - from) * float64(time.Second))
	return bt
}

func profileName(tc engine.ToolContext) string {
	if tc.Sandbox.Profile == "" {
		return "unrestricted"
	}
	return string(tc.Sandbox.Profile)
}

// buildContexts returns b's engine and its unrestricted and
// workspace-write calls (each a conversation of its own).
func buildContexts(t testing.TB, b packageBuild) (*engine.Engine, engine.ToolContext, engine.ToolContext) {
	e := newEngine(t, func(c *engine.Config) { c.SlowTimeout = 10 * time.Minute }, b.caches)
	return e, engine.ToolContext{WorkingDir: b.dir, ConversationID: "u", Env: gitEnv}, workspaceWrite(b.dir)
}

// TestPackageBuildsLikeUnrestricted: npm ci of a lock of local tarballs,
// and a virtual environment with pip installing a wheel and its
// dependencies from a local index, leave in workspace-write the very
// tree the unrestricted run leaves (paths, types, permissions, contents,
// but for the .pyc source times snapshot explains), in the workspace,
// where the user's next command, outside the engine and in
// workspace-write, runs what they installed; and the .pyc files pip
// compiled are current, so the next import loads them rather than
// compiling the modules again.
func TestPackageBuildsLikeUnrestricted(t *testing.T) {
	needNamespaces(t)
	for _, pb := range packageBuilds {
		t.Run(pb.name, func(t *testing.T) {
			b := pb.make(t)
			e, u, ws := buildContexts(t, b)
			ut := buildRun(t, e, b, u)
			want := snapshot(t, b.dir, b.out)
			st := buildRun(t, e, b, ws)
			sameTree(t, "workspace-write", want, snapshot(t, b.dir, b.out))
			if n := freshPyc(t, b.dir, b.out); pb.name == "pip-install" && n < 100 {
				t.Fatalf("only %d .pyc files in %s", n, b.out)
			}
			next := exec.Command("bash", "-c", b.next)
			next.Dir = b.dir
			if out, err := next.CombinedOutput(); err != nil || string(out) != b.want {
				t.Fatalf("the user's next command %q: %v %q, want %q", b.next, err, out, b.want)
			}
			if r := e.Run(context.Background(), ws, engine.Input{Command: b.next}); r.Status != engine.StatusOK || r.Output != b.want {
				t.Fatalf("the next command in workspace-write %q: %s %q, want %q", b.next, r.Status, r.Output, b.want)
			}
			t.Logf("%d paths alike; unrestricted %+v, workspace-write %+v", len(want), ut, st)
		})
	}
}

// BenchmarkPackageBuildsWarm: npm ci and pip install (see
// TestPackageBuildsLikeUnrestricted) from scratch, unrestricted and in
// workspace-write alternately in one run (-benchtime=Nx: N of each; the
// first of each round alternates), after one unrestricted warm-up; it
// reports each one's median wall time (the engine's Run), the build's
// own in its shell (inside: the rest is the sandbox's start and the
// layer's apply) and CPU time (the command's processes: on a loaded
// machine the wall time is mostly the queue for a CPU), the ratios of
// the medians, and each round in the log; it fails if the
// workspace-write run's tree differs from the unrestricted one of its
// round.
func BenchmarkPackageBuildsWarm(b *testing.B) {
	needNamespaces(b)
	for _, build := range packageBuilds {
		b.Run(build.name, func(b *testing.B) {
			pb := build.make(b)
			e, u, ws := buildContexts(b, pb)
			buildRun(b, e, pb, u)
			var ut, st []buildTimes
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				trees := map[string]map[string]treeEntry{}
				for _, tc := range alternate(i, u, ws) {
					bt := buildRun(b, e, pb, tc)
					b.StopTimer()
					if tc.Sandbox.Profile == "" {
						ut = append(ut, bt)
					} else {
						st = append(st, bt)
					}
					trees[profileName(tc)] = snapshot(b, pb.dir, pb.out)
					b.StartTimer()
				}
				sameTree(b, "workspace-write", trees["unrestricted"], trees["workspace-write"])
				b.Logf("round %d: unrestricted %v, workspace-write %v, load %s", i+1, ut[i], st[i], loadavg())
			}
			b.StopTimer()
			for _, m := range []struct {
				unit string
				of   func(buildTimes) time.Duration
			}{
				{"", func(t buildTimes) time.Duration { return t.wall }},
				{"inside-", func(t buildTimes) time.Duration { return t.inside }},
				{"cpu-", func(t buildTimes) time.Duration { return t.cpu }},
			} {
				mu, ms := medianOf(ut, m.of), medianOf(st, m.of)
				b.ReportMetric(float64(mu.Milliseconds()), "unrestricted-"+m.unit+"ms")
				b.ReportMetric(float64(ms.Milliseconds()), "workspace-write-"+m.unit+"ms")
				b.ReportMetric(float64(ms)/float64(mu), m.unit+"ratio")
			}
		})
	}
}

// alternate returns the two calls, the first of them the one whose turn
// it is in round i.
func alternate(i int, a, b engine.ToolContext) []engine.ToolContext {
	if i%2 == 1 {
		return []engine.ToolContext{b, a}
	}
	return []engine.ToolContext{a, b}
}

// medianOf is the median of the runs' figure.
func medianOf(runs []buildTimes, of func(buildTimes) time.Duration) time.Duration {
	d := make([]time.Duration, len(runs))
	for i, r := range runs {
		d[i] = of(r)
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// String is how a round's log shows the times.
func (t buildTimes) String() string {
	return fmt.Sprintf("%v (inside %v, CPU %v)", t.wall.Round(time.Millisecond), t.inside.Round(time.Millisecond), t.cpu)
}

// loadavg is the first figure of /proc/loadavg (the load over the last
// minute), or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
