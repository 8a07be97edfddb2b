package cli

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestSandboxedRunLeavesNothing: once `run -sandbox P` has exited (its
// tear-down is left to the kernel's exit of its threads, see
// sandbox.World.Close), nothing of it remains: no file in its $TMPDIR
// (the output directory, the world's directory), no thread whose view has
// a mount below that $TMPDIR (every mount namespace of the run, the
// world's and the command's, has the world's file system there), no
// descriptor of a file there, no process started from it, and none of the
// command's cgroups. (Namespaces are not compared by inode number: the
// kernel gives a freed number to the next namespace anyone makes.)
func TestSandboxedRunLeavesNothing(t *testing.T) {
	c := sandbox.Probe()
	testenv.Needf(t, testenv.Namespaces, c.Available() && c.Namespaces, "no private namespaces for sandboxed commands: %s", c)
	dir := t.TempDir()
	for _, profile := range []string{"read-only", "workspace-write"} {
		tmp := t.TempDir()
		probe := `cat /proc/self/cgroup; grep -c " ` + tmp + `/" /proc/self/mountinfo`
		r := demo(t, []string{"TMPDIR=" + tmp}, "run", "-C", dir, "-sandbox", profile, probe)
		if r.code != 0 {
			t.Fatalf("%s: %v", profile, r)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if n := lines[len(lines)-1]; n == "0" || n == "" {
			// The check below would find nothing to find.
			t.Fatalf("%s: the command sees no mount below its $TMPDIR: %v", profile, r)
		}
		var cgroups []string
		for _, l := range lines {
			if strings.Count(l, ":") >= 2 && strings.Contains(l, "/bashvisor-") {
				// The engine's (without cgroups, as a user they are not
				// delegated to, the command is in the caller's).
				cgroups = append(cgroups, l)
			}
		}
		t.Logf("%s: the command's cgroups %v, mounts below $TMPDIR %s", profile, cgroups, lines[len(lines)-1])
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Errorf("%s: left in $TMPDIR: %v", profile, left)
		}
		for _, m := range leftovers(t, tmp) {
			t.Errorf("%s: %s", profile, m)
		}
		for _, l := range cgroups {
			if p := cgroupDir(l); p != "" {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("%s: the command's cgroup %s remains", profile, p)
				}
			}
		}
	}
}

// leftovers lists what still refers to the run: a thread whose view has
// a mount below tmp, a process holding a file there, or whose working
// directory, executable or arguments name it. Processes this user cannot
// read are skipped (as root, none).
func leftovers(t *testing.T, tmp string) []string {
	t.Helper()
	var found []string
	procs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		pid := p.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		base := "/proc/" + pid
		tasks, _ := os.ReadDir(base + "/task")
		for _, task := range tasks {
			if m := mountBelow(base+"/task/"+task.Name()+"/mountinfo", tmp); m != "" {
				found = append(found, "thread "+pid+"/"+task.Name()+" sees a mount on "+m)
			}
		}
		fds, _ := os.ReadDir(base + "/fd")
		for _, f := range fds {
			if l, err := os.Readlink(base + "/fd/" + f.Name()); err == nil && strings.HasPrefix(l, tmp+"/") {
				found = append(found, "process "+pid+" holds "+l)
			}
		}
		for _, link := range []string{"cwd", "exe"} {
			if l, err := os.Readlink(base + "/" + link); err == nil && strings.HasPrefix(l, tmp+"/") {
				found = append(found, "process "+pid+"'s "+link+" is "+l)
			}
		}
		if b, err := os.ReadFile(base + "/cmdline"); err == nil && strings.Contains(string(b), tmp+"/") {
			found = append(found, "process "+pid+" runs "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// mountBelow returns the first mount point below dir in a mountinfo file
// ("": none, or unreadable).
func mountBelow(mountinfo, dir string) string {
	f, err := os.Open(mountinfo)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			return fields[4]
		}
	}
	return ""
}

// cgroupDir is the directory of a /proc/PID/cgroup line ("0::/path" on
// the v2 hierarchy, "N:controllers:/path" on a v1 one), "" when it is not
// found where this host mounts it.
func cgroupDir(line string) string {
	parts := strings.SplitN(line, ":", 3)
	if len(parts) != 3 {
		return ""
	}
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if parts[0] == "0" && parts[1] == "" {
			if fi, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil && !fi.IsDir() {
				return filepath.Join(root, parts[2])
			}
			continue
		}
		for _, c := range strings.Split(strings.TrimPrefix(parts[1], "name="), ",") {
			if d := filepath.Join("/sys/fs/cgroup", c); dirExists(d) {
				return filepath.Join(d, parts[2])
			}
		}
	}
	return ""
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// TestSandboxedRunWithHomeNotWritable: a user whose HOME does not exist
// and cannot be made (a system user's /nonexistent; here a path in /proc,
// where no user, root included, makes a directory) still runs sandboxed
// commands: the caches the world would mount at the user's paths start
// empty in the world instead.
func TestSandboxedRunWithHomeNotWritable(t *testing.T) {
	c := sandbox.Probe()
	testenv.Needf(t, testenv.Namespaces, c.Available() && c.Namespaces, "no private namespaces for sandboxed commands: %s", c)
	home := "/proc/bashvisor-no-home"
	if err := os.Mkdir(home, 0o700); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s could be made: %v", home, err)
	}
	env := []string{"HOME=" + home, "GOCACHE=", "GOMODCACHE=", "GOPATH=", "npm_config_cache=", "PIP_CACHE_DIR=", "XDG_CACHE_HOME="}
	for _, profile := range []string{"read-only", "workspace-write"} {
		if r := demo(t, env, "run", "-C", t.TempDir(), "-sandbox", profile, "echo ran"); r.code != 0 || r.stdout != "ran\n" {
			t.Errorf("%s: %v", profile, r)
		}
	}
}
