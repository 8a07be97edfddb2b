package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/testenv"
)

// traced runs the built bashvisor with args under strace, following its
// children, and returns the trace of the given system calls.
func traced(t *testing.T, calls string, args ...string) string {
	t.Helper()
	if buildErr != "" {
		t.Fatal(buildErr)
	}
	strace := testenv.NeedsTool(t, "strace")[0]
	out := filepath.Join(t.TempDir(), "trace")
	cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", out, "-e", "trace=" + calls, bin}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bashvisor %q: %v\n%s", args, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRunDoesOnlyWhatTheCommandNeeds: a one-shot unrestricted `bashvisor
// run -- true` does no sandbox work (the sandbox is probed on first use:
// no namespace is made) and starts no process but the command's shell and
// the engine's watchdog (the cgroup probe starts none); a sandboxed one
// does probe (the control, first: the trace sees namespaces made).
func TestRunDoesOnlyWhatTheCommandNeeds(t *testing.T) {
	ro := traced(t, "unshare", "run", "-sandbox", "read-only", "--", "true")
	testenv.Needf(t, testenv.Namespaces, strings.Contains(ro, "unshare("),
		"no namespaces made for a read-only run: the trace cannot show an unrestricted run's probe (trace:\n%s)", ro)
	tr := traced(t, "unshare,execve", "run", "--", "true")
	if strings.Contains(tr, "unshare(") {
		t.Errorf("an unrestricted run made namespaces (probed the sandbox):\n%s", tr)
	}
	var execs []string
	for line := range strings.SplitSeq(tr, "\n") {
		if _, call, ok := strings.Cut(line, " execve(\""); ok && !strings.Contains(line, "= -1") {
			execs = append(execs, strings.SplitN(call, "\"", 2)[0])
		}
	}
	if len(execs) != 3 || filepath.Base(execs[1]) != "bash" || filepath.Base(execs[2]) != "bash" {
		t.Errorf("programs started: %q, want bashvisor, then bash twice (the watchdog and the command):\n%s", execs, tr)
	}
	if !strings.Contains(tr, `"--noprofile", "--norc", "-c", "trap`) || !strings.Contains(tr, `["bash", "-c", "true"]`) {
		t.Errorf("the watchdog or the command missing from the trace:\n%s", tr)
	}

}

// TestSandboxedRunMakesOneNetworkNamespace: a one-shot `bashvisor run
// -sandbox read-only -- true` makes one network namespace (the sandbox's
// probe makes it, the conversation's world takes it from the pool) and
// three mount namespaces (the probe's, the world's, the command's), and
// its command runs in the world's network namespace, with loopback up.
func TestSandboxedRunMakesOneNetworkNamespace(t *testing.T) {
	if os.Geteuid() != 0 { // not a missing feature: a rootless world's namespaces come from a user namespace of its own
		t.Skip("as a user other than root the world's namespaces are made by a child in a user namespace")
	}
	tr := traced(t, "unshare,setns", "run", "-sandbox", "read-only", "--", "true")
	testenv.Needf(t, testenv.Namespaces, strings.Contains(tr, "unshare("), "no namespaces made for a read-only run (trace:\n%s)", tr)
	var netns, mntns int // namespaces made
	for line := range strings.SplitSeq(tr, "\n") {
		if _, call, ok := strings.Cut(line, " unshare("); ok {
			flags, _, _ := strings.Cut(call, ")")
			netns += strings.Count(flags, "CLONE_NEWNET")
			mntns += strings.Count(flags, "CLONE_NEWNS")
		}
	}
	if netns != 1 || mntns != 3 {
		t.Errorf("%d network and %d mount namespaces made, want 1 and 3:\n%s", netns, mntns, tr)
	}
	// /proc/net/dev lists the interfaces of the reader's network namespace
	// (/sys/class/net, the host's sysfs, would list the host's); a port
	// nothing listens on refuses the connection where loopback is up
	// (ENETUNREACH where it is down).
	out := run(t, "run", "-sandbox", "read-only", "--", "tail -n +3 /proc/net/dev | cut -d: -f1; (: </dev/tcp/127.0.0.1/9) 2>&1; true")
	lines := strings.Split(strings.TrimSpace(out.stdout), "\n")
	if out.code != 0 || len(lines) < 2 || strings.TrimSpace(lines[0]) != "lo" || !strings.Contains(lines[1], "Connection refused") {
		t.Errorf("the command's network: exit %d, %q (stderr %q), want loopback alone and up", out.code, out.stdout, out.stderr)
	}
}

// TestCapabilitiesDroppedBeforeTheRuntime: as root, bashvisor drops the
// capabilities that read other processes' memory before the Go runtime
// starts its threads, so the engine's start signals no thread (psx sends
// each thread SIGRT_1 for each capability it drops) and the command still
// runs without them.
func TestCapabilitiesDroppedBeforeTheRuntime(t *testing.T) {
	if os.Geteuid() != 0 { // not a missing feature: such a user has no capability to drop
		t.Skip("as a user other than root there is no capability to drop")
	}
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	// Without cgo (no gcc) the engine drops them through psx, on every
	// thread; CI has gcc (REQUIRE_TOOLS).
	testenv.Needf(t, testenv.Tools, strings.Contains(string(info), "CGO_ENABLED=1"), "built without cgo: the capabilities are dropped through psx")
	tr := traced(t, "prctl", "run", "--", "grep CapBnd /proc/self/status")
	if strings.Contains(tr, "--- SIGRT_1") {
		t.Errorf("threads were signalled (psx) to drop capabilities:\n%s", tr)
	}
	if n := strings.Count(tr, "PR_CAPBSET_DROP"); n != 7 {
		t.Errorf("%d PR_CAPBSET_DROP calls, want 7 (one per capability, before the runtime):\n%s", n, tr)
	}
	out := run(t, "run", "--", "grep CapBnd /proc/self/status")
	bnd := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out.stdout), "CapBnd:"))
	v, err := strconv.ParseUint(bnd, 16, 64)
	if err != nil {
		t.Fatalf("no CapBnd in %q: %v", out.stdout, err)
	}
	const memCaps = 1<<19 | 1<<21 | 1<<39 | 1<<38 | 1<<16 | 1<<17 | 1<<22 // ptrace, admin, bpf, perfmon, module, rawio, boot
	if v&memCaps != 0 {
		t.Errorf("the command kept memory-reading capabilities: CapBnd %s", bnd)
	}
}
