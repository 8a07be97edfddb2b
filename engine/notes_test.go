package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestDenialNotes: each boundary of the sandbox that stops a command is
// named in the note that ends its result, with the setting that would move
// it (or the word that none does).
func TestDenialNotes(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t, func(c *engine.Config) {
		c.Sandbox.Limits.ScratchBytes = 8 << 20
		c.Sandbox.Limits.FileSize = 1 << 20
	})
	ws := t.TempDir()
	marker := "bashvisor-note-" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(filepath.Join(os.TempDir(), marker), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join(os.TempDir(), marker)) })
	cases := []struct {
		name, profile, command, note string
		tools                        []string
	}{
		{"write", "read-only", "echo x > file",
			"[sandbox read-only: only /tmp ($TMPDIR) and the build caches are writable (setting: sandbox profile workspace-write)]", nil},
		{"write outside", "workspace-write", "echo x > /etc/bashvisor-note",
			"[sandbox workspace-write: writes outside the working directory, its git directory, /tmp and the build caches fail (setting: writable roots)]", nil},
		{"no network", "read-only", "curl -sS --max-time 5 http://registry.example/",
			"[sandbox: no network but the conversation's own loopback; hosts can be allowed through the egress proxy (setting: allow-net)]", []string{"curl"}},
		{"udp socket", "read-only", `python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)'`,
			"[sandbox: only TCP sockets are allowed", []string{"python3"}},
		{"quota", "read-only", "for i in $(seq 12); do head -c 1000K /dev/zero > /tmp/big$i || exit; done",
			"[sandbox: the conversation's quota of 8 MiB is full: its /tmp and the changes to its build caches hold ", nil},
		{"file size", "read-only", "rm -f /tmp/big*; head -c 2M /dev/zero > /tmp/f",
			"[sandbox: a file reached the size limit of 1 MiB per file (setting: Sandbox.Limits.FileSize)]", nil},
		{"host tmp", "read-only", "cat /tmp/" + marker,
			"[sandbox: /tmp is the conversation's own, not the host's: files that unrestricted commands or the host put in /tmp are not there]", nil},
		{"setuid", "workspace-write", "touch f && chmod u+s f",
			"[sandbox: the sandbox denies this to every command (ptrace, mounts, setuid and setgid bits, new namespaces, signals to processes it did not start); no setting allows it but running the command unrestricted (sandbox profile none)]", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.tools) > 0 {
				testenv.NeedsTool(t, c.tools...)
			}
			tc := conversation("notes", ws, engine.Profile(c.profile))
			r := e.Run(context.Background(), tc, engine.Input{Command: c.command})
			if r.Status != engine.StatusFailed {
				t.Fatalf("%s %q", r.Status, r.Output)
			}
			lines := strings.Split(strings.TrimSpace(r.Output), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, c.note) {
				t.Fatalf("last line %q, want %q\n%s", last, c.note, r.Output)
			}
		})
	}
}

// TestProcessLimitNote: a command that forks past the sandbox's process
// limit (a pids cgroup) gets the note that names it. The command forks
// 40 children that sleep, failing at the first refused fork (after
// killing the ones it made): bash instead retries a refused fork after
// sleeping, and its outcome then depends on the timing (a child that
// ends during the retry sleep made it fail with "Interrupted system
// call", exit 254; one that ended between two forks let it go on).
func TestProcessLimitNote(t *testing.T) {
	needNamespaces(t)
	cgroupBase(t)
	testenv.NeedsTool(t, "perl")
	e := newEngine(t, func(c *engine.Config) { c.Sandbox.Limits.Processes = 16 })
	r := e.Run(context.Background(), conversation("pids", t.TempDir(), engine.ReadOnly), engine.Input{Command: `perl -e '
for (1..40) {
	my $p = fork;
	if (!defined $p) { my $e = $!; kill "KILL", @k; waitpid $_, 0 for @k; die "fork: $e\n" }
	if (!$p) { sleep 30; exit }
	push @k, $p;
}
kill "KILL", @k; waitpid $_, 0 for @k'`})
	lines := strings.Split(strings.TrimSpace(r.Output), "\n")
	want := "[sandbox: the command reached its limit of 16 processes and threads (setting: Sandbox.Limits.Processes)]"
	if r.Status != engine.StatusFailed || lines[len(lines)-1] != want {
		t.Fatalf("%s %q", r.Status, r.Output)
	}
}

// TestQuotaCoversJobFiles: one quota per conversation: what its
// background jobs' output files hold is taken from what its /tmp may hold
// when the next sandboxed command starts, and the note says both.
func TestQuotaCoversJobFiles(t *testing.T) {
	needNamespaces(t)
	e := newEngine(t, func(c *engine.Config) {
		c.Sandbox.Limits.ScratchBytes = 8 << 20
		c.Output.JobFileCap = 4 << 20
	})
	tc := conversation("quota", t.TempDir(), engine.ReadOnly)
	j := e.Run(context.Background(), tc, engine.Input{Mode: engine.ModeBackground, Command: "head -c 5M /dev/zero | tr '\\0' a"})
	if j.Status != engine.StatusStarted {
		t.Fatalf("%s %q", j.Status, j.Output)
	}
	waitJob(t, e, j.JobID, tc.ConversationID)
	r := e.Run(context.Background(), tc, engine.Input{Command: "for i in 1 2 3 4 5 6; do head -c 1000K /dev/zero > /tmp/f$i || exit; done; echo all"})
	if r.Status != engine.StatusFailed || !strings.Contains(r.Output, "No space left on device") ||
		!regexp.MustCompile(`its background jobs' output files [34]\.\d MiB, its undo store 0 B; remove files from /tmp \(setting: Sandbox.Limits.ScratchBytes\)\]$`).MatchString(r.Output) {
		t.Fatalf("6 MB into /tmp with 4 MiB of job files in an 8 MiB quota: %s %q", r.Status, r.Output)
	}
}
