package engine

import (
	"strconv"
	"strings"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/jobs"
	"github.com/bashvisor/bashvisor/internal/supervisor"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// sandboxNote is the one note that ends a sandboxed command's result when
// a boundary of its sandbox stopped it. It names the boundary and the
// setting that would move it (or says that none does); the engine never
// retries or widens anything itself. The kernel says only EPERM, EACCES,
// EROFS or ENOSPC, so the note is chosen from what the command printed, in
// this order:
//
//   - the egress proxy refused a destination (known: the proxy reports it);
//   - ENOSPC while the conversation's file system is (nearly) full: its
//     quota (Sandbox.Limits.ScratchBytes), which its /tmp, the changes to
//     its caches and its job output files share;
//   - EFBIG: the file size limit (Sandbox.Limits.FileSize);
//   - fork failing with EAGAIN: the process limit
//     (Sandbox.Limits.Processes);
//   - a socket refused (EPERM next to "socket"): only TCP is allowed, on
//     the conversation's loopback and through the proxy; no setting allows
//     UDP, ICMP, raw or unix sockets;
//   - a connection to a loopback address refused: the loopback is the
//     conversation's own, a host's service is reached when allow-net
//     names its host:port;
//   - HOME below the host's /tmp, which the sandbox hides, when the
//     output names it (or git's missing identity);
//   - a name that does not resolve or a network that is unreachable:
//     without an allowlist there is no network but the conversation's
//     loopback (setting: allow-net); with one, only clients that use the
//     proxy get out;
//   - a missing file below /tmp: the conversation's /tmp is its own, so
//     what an unrestricted command (or the host) put in /tmp is not there;
//   - a write refused (EROFS, EACCES, EBUSY): what the profile lets it
//     write (setting: the profile, writable roots);
//   - another EPERM: what the sandbox denies to every command (ptrace,
//     mounts, setuid bits, new namespaces, signals to processes outside
//     the command); only an unrestricted command may.
//
// "" when none applies (the command failed on its own).
func (e *Engine) sandboxNote(tc ToolContext, res Result, o jobs.Outcome) string {
	sbx := tc.Sandbox
	if !sbx.On() {
		return ""
	}
	if len(o.Refused) > 0 {
		return "[sandbox: the egress proxy refused " + strings.Join(o.Refused, ", ") +
			": not in the network allowlist (setting: allow-net)]"
	}
	if res.Status != StatusFailed {
		return ""
	}
	out := res.Output
	lim := e.cfg.Sandbox.Limits.WithDefaults()
	switch {
	case strings.Contains(out, "No space left on device") && worldFull(e.sup.World(tc.ConversationID)):
		w := e.sup.World(tc.ConversationID)
		used, jobBytes, undoBytes := w.Used, w.JobBytes, w.UndoBytes
		return "[sandbox: the conversation's quota of " + limitBytes(lim.ScratchBytes) + " is full: its /tmp and the changes to its build caches hold " +
			truncate.Humanize(int64(used)) + ", its background jobs' output files " + truncate.Humanize(int64(jobBytes)) +
			", its undo store " + truncate.Humanize(int64(undoBytes)) + "; remove files from /tmp (setting: Sandbox.Limits.ScratchBytes)]"
	case mentions(out, []string{"File too large", "File size limit exceeded", "EFBIG"}):
		return "[sandbox: a file reached the size limit of " + limitBytes(lim.FileSize) + " per file (setting: Sandbox.Limits.FileSize)]"
	case strings.Contains(out, "fork") && strings.Contains(out, "Resource temporarily unavailable"):
		return "[sandbox: the command reached its limit of " + strconv.Itoa(lim.Processes) +
			" processes and threads (setting: Sandbox.Limits.Processes)]"
	case socketRefused(out):
		return "[sandbox: only TCP sockets are allowed (the conversation's own loopback, and hosts the allowlist names through the egress proxy); " +
			"UDP, ICMP (ping), raw, netlink and unix sockets are denied by the sandbox's seccomp filter, and no setting allows them: run the command unrestricted (sandbox profile none)]"
	case loopbackNote(out) != "":
		return loopbackNote(out)
	case e.homeNote(tc, out) != "":
		return e.homeNote(tc, out)
	case mentions(out, networkErrors) && len(sbx.Network) == 0:
		return "[sandbox: no network but the conversation's own loopback; hosts can be allowed through the egress proxy (setting: allow-net)]"
	case mentions(out, networkErrors):
		return "[sandbox: the network is reached only through the egress proxy, for the hosts the allowlist names: " +
			"a host not named does not resolve and cannot be connected to (setting: allow-net)]"
	case missingInTmp(out):
		return "[sandbox: /tmp is the conversation's own, not the host's: files that unrestricted commands or the host put in /tmp are not there]"
	case mentions(out, writeErrors):
		if sbx.Profile == WorkspaceWrite {
			return "[sandbox workspace-write: writes outside the working directory, its git directory, " + writableList(sbx.Writable) +
				"/tmp and the build caches fail (setting: writable roots)]"
		}
		return "[sandbox read-only: only /tmp ($TMPDIR) and the build caches are writable (setting: sandbox profile workspace-write)]"
	case mentions(out, []string{"Operation not permitted", "EPERM"}):
		return "[sandbox: the sandbox denies this to every command (ptrace, mounts, setuid and setgid bits, new namespaces, signals to processes it did not start); " +
			"no setting allows it but running the command unrestricted (sandbox profile none)]"
	}
	return ""
}

// worldFull reports whether the conversation's file system has less than
// 1 MiB, or 5% of its size up to 16 MiB, free.
func worldFull(w supervisor.WorldUsage) bool {
	used, size := w.Used, w.Total
	return size > 0 && size-used < max(min(size/20, 16<<20), 1<<20)
}

// limitBytes formats a sandbox limit (config.Unlimited: "no limit").
func limitBytes(n uint64) string {
	if n == config.Unlimited {
		return "no limit"
	}
	return humanBytes(int64(n))
}

// socketRefused reports whether the output says a socket was refused:
// EPERM (or EACCES) with "socket" in the same output, as ping, Python and
// Node print it.
func socketRefused(out string) bool {
	lower := strings.ToLower(out)
	return strings.Contains(lower, "socket") &&
		mentions(out, []string{"Operation not permitted", "[Errno 1]", "EPERM", "Permission denied", "EACCES"})
}

// missingInTmp reports whether a line says a path below /tmp does not
// exist.
func missingInTmp(out string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "/tmp/") && strings.Contains(line, "No such file or directory") {
			return true
		}
	}
	return false
}

func writableList(roots []string) string {
	if len(roots) == 0 {
		return ""
	}
	return strings.Join(roots, ", ") + ", "
}

// What a tool prints when a kernel boundary refused a write, or when it
// found no network.
var (
	writeErrors   = []string{"Read-only file system", "Permission denied", "Device or resource busy", "EROFS", "EACCES"}
	networkErrors = []string{"Could not resolve host", "Temporary failure in name resolution", "Name or service not known",
		"Network is unreachable", "getaddrinfo", "ENOTFOUND", "EAI_AGAIN", "ENETUNREACH", "no such host", "Failed to establish a new connection"}
)

// mentions reports whether s contains any of subs.
func mentions(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
