//go:build linux

package sandbox_test

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// snapshot describes a directory tree: names, types, modes, owners, sizes,
// contents, mtimes and xattrs, so any change shows up as a diff.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		line := fmt.Sprintf("%s mode=%o uid=%d gid=%d size=%d mtime=%d.%d atime-ignored",
			strings.TrimPrefix(p, root), st.Mode, st.Uid, st.Gid, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" sha=%x", sha256.Sum256(b))
		}
		buf := make([]byte, 1024)
		if n, err := unix.Llistxattr(p, buf); err == nil {
			line += fmt.Sprintf(" xattrs=%q", buf[:n])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func denied(out string) bool {
	return strings.Contains(out, "Permission denied") || strings.Contains(out, "Operation not permitted") ||
		strings.Contains(out, "EACCES") || strings.Contains(out, "EPERM")
}

func TestWritesOutsideScratchFail(t *testing.T) {
	requireSandbox(t)
	s := t.TempDir() // created before the sandbox: outside the scratch dir
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(s, "f"), []byte("original\n"), 0o644))
	must(os.Mkdir(filepath.Join(s, "empty"), 0o755))
	must(os.Mkdir(filepath.Join(s, "dir"), 0o755))
	must(os.WriteFile(filepath.Join(s, "dir", "g"), []byte("g\n"), 0o600))
	must(os.Symlink("f", filepath.Join(s, "link")))
	xattrs := unix.Setxattr(filepath.Join(s, "f"), "user.bashvisor", []byte("1"), 0) == nil
	before := snapshot(t, s)

	py := testenv.HasTool(t, "python3")
	cases := []struct{ name, cmd string }{
		{"create", `echo x > S/new`},
		{"create-in-subdir", `echo x > S/dir/new`},
		{"append", `echo x >> S/f`},
		{"overwrite", `echo x > S/f`},
		{"truncate-redirect", `: > S/f`},
		{"truncate-cmd", `truncate -s 0 S/f`},
		{"dd-notrunc", `echo x | dd of=S/f conv=notrunc status=none`},
		{"cp", `cp /etc/hostname S/f`},
		{"rename", `mv S/f S/renamed`},
		{"rename-into-scratch", `mv S/f "$TMPDIR/"`},
		{"rename-dir", `mv S/dir S/dir2`},
		{"hardlink", `ln S/f S/hard`},
		{"hardlink-into-scratch", `ln S/f "$TMPDIR/hard"`},
		{"symlink", `ln -s /etc/passwd S/sym`},
		{"mkdir", `mkdir S/newdir`},
		{"rmdir", `rmdir S/empty`},
		{"unlink", `rm S/f`},
		{"unlink-symlink", `rm S/link`},
		{"rm-rf", `rm -rf S/dir`},
		{"mkfifo", `mkfifo S/fifo`},
		{"mknod", `mknod S/null c 1 3`},
		{"chmod", `chmod 777 S/f`},
		{"chmod-dir", `chmod 700 S/dir`},
		{"chown", `chown 1:1 S/f`},
		{"chgrp", `chgrp 1 S/f`},
		{"touch", `touch S/f`},
		{"touch-date", `touch -d 2000-01-01 S/f`},
		{"touch-nocreate", `touch -c -m S/f`},
		{"write-workdir", `echo x > ./new-in-workdir`},
		{"write-etc", `echo x >> /etc/hostname`},
	}
	if py {
		cases = append(cases,
			struct{ name, cmd string }{"setxattr", `python3 -c 'import os; os.setxattr("S/f", "user.x", b"1")'`},
			struct{ name, cmd string }{"lsetxattr", `python3 -c 'import os; os.setxattr("S/link", "user.x", b"1", follow_symlinks=False)'`},
			struct{ name, cmd string }{"fsetxattr", `python3 -c 'import os; fd=os.open("S/f", os.O_RDONLY); os.setxattr(fd, "user.x", b"1")'`},
			struct{ name, cmd string }{"fchmod", `python3 -c 'import os; fd=os.open("S/f", os.O_RDONLY); os.fchmod(fd, 0o777)'`},
			struct{ name, cmd string }{"fchown", `python3 -c 'import os; fd=os.open("S/f", os.O_RDONLY); os.fchown(fd, 1, 1)'`},
			struct{ name, cmd string }{"futimens", `python3 -c 'import os; fd=os.open("S/f", os.O_RDONLY); os.utime(fd, (0, 0))'`},
			struct{ name, cmd string }{"utime", `python3 -c 'import os; os.utime("S/f", (0, 0))'`},
			struct{ name, cmd string }{"open-rdwr", `python3 -c 'open("S/f", "r+").write("x")'`},
			struct{ name, cmd string }{"os-truncate", `python3 -c 'import os; os.truncate("S/f", 0)'`},
			struct{ name, cmd string }{"ftruncate-rdonly", `python3 -c 'import os; fd=os.open("S/f", os.O_RDONLY); os.ftruncate(fd, 0)'`},
		)
		if xattrs {
			cases = append(cases, struct{ name, cmd string }{"removexattr", `python3 -c 'import os; os.removexattr("S/f", "user.bashvisor")'`})
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, strings.ReplaceAll(c.cmd, "S/", s+"/"))
			if r.code == 0 {
				t.Errorf("%s: exit 0, want failure\n%s", c.cmd, r.out)
			}
			// ftruncate on a read-only fd is EINVAL/EBADF: harmless, but not a sandbox error.
			// Landlock answers EXDEV for links and renames it denies across
			// directories (the "refer" right).
			exdev := strings.Contains(r.out, "Invalid cross-device link")
			if !denied(r.out) && !exdev && c.name != "ftruncate-rdonly" {
				t.Errorf("%s: want EACCES/EPERM, got exit %d\n%s", c.cmd, r.code, r.out)
			}
			if after := snapshot(t, s); after != before {
				t.Fatalf("%s changed the sentinel tree:\nbefore:\n%s\nafter:\n%s", c.cmd, before, after)
			}
		})
	}
	if _, err := os.Stat("new-in-workdir"); err == nil {
		t.Error("file created in the package dir")
	}
}

func TestScratchAndDevNullWritable(t *testing.T) {
	requireSandbox(t)
	r := run(t, `set -e
cd "$TMPDIR"
echo hello > a && cat a
echo more >> a
mkdir -p d1/d2 d3
mv a d1/d2/b && mv d1/d2/b d3/c && ln d3/c d3/hard && ln -s c d3/sym
truncate -s 1 d3/c
rm -r d1 && rmdir d3 2>/dev/null || rm -r d3
echo x > /dev/null
echo y >/dev/zero
head -c 100 /dev/zero | wc -c
[ "$XDG_CACHE_HOME" = "$TMPDIR/.cache" ] && [ -d "$XDG_CACHE_HOME" ]
test -w "$TMPDIR"
echo done`)
	if r.code != 0 || !strings.Contains(r.out, "hello") || !strings.HasSuffix(r.out, "100\ndone\n") {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
	if _, err := os.Stat(r.cmd.Scratch); !os.IsNotExist(err) {
		t.Errorf("scratch dir %s still exists after Cleanup: %v", r.cmd.Scratch, err)
	}
	if st, err := os.Stat(filepath.Dir(r.cmd.Scratch)); err != nil || !st.IsDir() {
		t.Errorf("scratch parent: %v", err)
	}
}

func TestScratchIsPrivateAndRemoved(t *testing.T) {
	requireSandbox(t)
	r := run(t, `stat -c %a "$TMPDIR"; mkdir -m 000 "$TMPDIR/locked"; echo x > "$TMPDIR/file"`)
	if r.code != 0 || !strings.HasPrefix(r.out, "700\n") {
		t.Fatalf("exit %d\n%s", r.code, r.out)
	}
	if _, err := os.Stat(r.cmd.Scratch); !os.IsNotExist(err) {
		t.Errorf("scratch dir still exists: %v", err)
	}
	if r.cg != nil {
		if _, err := os.Stat(r.cg.Dir()); !os.IsNotExist(err) {
			t.Errorf("cgroup still exists: %v", err)
		}
	}
}

func TestLargeHeredoc(t *testing.T) {
	requireSandbox(t)
	body := strings.Repeat("0123456789abcdef\n", 100<<10/17) // ~100 KB: above the 64 KB pipe buffer, below the 128 KB argv string limit
	r := run(t, "cat <<'EOF' | wc -c\n"+body+"EOF")
	if r.code != 0 || strings.TrimSpace(r.out) != fmt.Sprint(len(body)) {
		t.Fatalf("exit %d, want %d bytes\n%.500s", r.code, len(body), r.out)
	}
}

func TestReadingAndTools(t *testing.T) {
	requireSandbox(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/app\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(goMain), 0o644); err != nil {
		t.Fatal(err)
	}
	if testenv.HasTool(t, "git") {
		git := exec.Command("bash", "-c", `git init -q && git add go.mod main.go && git -c user.name=t -c user.email=t@e commit -qm init && echo // change >> main.go`)
		git.Dir = dir
		if out, err := git.CombinedOutput(); err != nil {
			t.Fatalf("git setup: %v\n%s", err, out)
		}
	}
	cases := []struct{ name, tool, cmd, want string }{
		{"read", "cat", `cat go.mod | head -1`, "module example.com/app"},
		{"ls", "ls", `ls`, "main.go"},
		{"etc", "cat", `grep -c root /etc/passwd`, ""},
		{"git-status", "git", `git status --short`, "M main.go"},
		{"git-log", "git", `git log --oneline | wc -l`, "1"},
		{"git-diff", "git", `git diff --stat`, "1 file changed"},
		// A build cache starts empty in every restricted command; a copy of
		// one warmed outside (once per test run) keeps these two quick.
		{"go-build", "go", `cp -r "$WARM_GOCACHE" "$TMPDIR/gocache" && GOCACHE="$TMPDIR/gocache" go build -o "$TMPDIR/app" . && "$TMPDIR/app"`, "built ok"},
		{"go-vet", "go", `cp -r "$WARM_GOCACHE" "$TMPDIR/gocache" && GOCACHE="$TMPDIR/gocache" go vet . && echo vet ok`, "vet ok"},
		{"python3", "python3", `python3 -c 'print(1+1)'`, "2"},
		{"python3-tempfile", "python3", `python3 -c 'import tempfile; f=tempfile.NamedTemporaryFile(); f.write(b"x"); print("tmp ok")'`, "tmp ok"},
		{"node", "node", `node -e 'console.log(1+2)'`, "3"},
		{"node-wasm", "node", `node -e 'new WebAssembly.Memory({initial:1}); console.log("wasm ok")'`, "wasm ok"},
		{"java", "java", `java -version 2>&1`, "version"},
		{"tar-into-scratch", "tar", `tar -cf "$TMPDIR/a.tar" go.mod main.go && mkdir "$TMPDIR/x" && tar -xof "$TMPDIR/a.tar" -C "$TMPDIR/x" --no-same-permissions --touch 2>&1; cat "$TMPDIR/x/go.mod" | head -1`, "module example.com/app"},
		{"sort-big", "sort", `seq 300000 | sort -r | head -1`, "99999"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testenv.NeedsTool(t, c.tool)
			var env []string
			if c.tool == "go" {
				env = append(env, "WARM_GOCACHE="+warmGoCache(t))
			}
			r := runIn(t, zeroLimits, dir, c.cmd, env...)
			if r.code != 0 || !strings.Contains(r.out, c.want) {
				t.Fatalf("%s: exit %d, want %q\n%s", c.cmd, r.code, c.want, r.out)
			}
		})
	}
}

// goMain is the program TestReadingAndTools builds inside the sandbox.
const goMain = "package main\n\nfunc main() { println(\"built ok\") }\n"

var warmGo struct {
	once sync.Once
	dir  string
	err  error
}

// warmGoCache returns a Go build cache that has built and vetted goMain
// (once per test run, outside the sandbox); the test process removes it at
// exit.
func warmGoCache(t *testing.T) string {
	warmGo.once.Do(func() {
		mod, err := os.MkdirTemp("", "bashvisor-gomod-")
		if err != nil {
			warmGo.err = err
			return
		}
		defer os.RemoveAll(mod)
		if warmGo.dir, warmGo.err = os.MkdirTemp("", "bashvisor-gocache-"); warmGo.err != nil {
			return
		}
		cleanups = append(cleanups, func() { os.RemoveAll(warmGo.dir) })
		_ = os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/app\n\ngo 1.21\n"), 0o644)
		_ = os.WriteFile(filepath.Join(mod, "main.go"), []byte(goMain), 0o644)
		c := exec.Command("bash", "-c", `go build -o /dev/null . && go vet .`)
		c.Dir, c.Env = mod, append(os.Environ(), "GOCACHE="+warmGo.dir)
		if out, err := c.CombinedOutput(); err != nil {
			warmGo.err = fmt.Errorf("warming a Go build cache: %v\n%s", err, out)
		}
	})
	if warmGo.err != nil {
		t.Fatal(warmGo.err)
	}
	return warmGo.dir
}
