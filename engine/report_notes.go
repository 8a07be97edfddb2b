package engine

import (
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/bashvisor/bashvisor/config"
)

// Notes for where the sandbox surprises a command that does not fail on
// a boundary the kernel names: a service on the host's loopback that the
// conversation's own loopback does not have, and a HOME the sandbox hides.

// loopbackRefused matches a refused connection to a loopback address, as
// curl, wget, Python and Node print it: "Failed to connect to 127.0.0.1
// port 8080", "connect ECONNREFUSED 127.0.0.1:8080",
// "host='localhost', port=8080".
// Compiled on first use: not at every start of every program that links
// the engine.
var loopbackRefused = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost|\[::1\]|::1)(?::| port |', port=)(\d{1,5})`)
})

// refusedWords are what a client prints when nothing listens.
var refusedWords = []string{"Connection refused", "ECONNREFUSED", "Couldn't connect to server", "connection refused"}

// loopbackNote names the host:port a sandboxed command could not connect
// to on loopback, and the setting that reaches the host's service there;
// "" when the output shows no such refusal.
func loopbackNote(out string) string {
	if !mentions(out, refusedWords) {
		return ""
	}
	m := loopbackRefused().FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	host := strings.Trim(m[1], "[]")
	if host == "localhost" {
		host = "127.0.0.1"
	}
	hp := host + ":" + m[2]
	if strings.Contains(host, ":") {
		hp = "[" + host + "]:" + m[2]
	}
	return "[sandbox: nothing listens on " + hp + " in the conversation's own loopback (servers it started in the background are there); " +
		"a service on the host's loopback is reached only when allowed by name (setting: allow-net " + hp + ", on the command line -allow-net " + hp + ")]"
}

// home is the HOME a command of tc runs with.
func (e *Engine) home(tc ToolContext) string {
	if h, ok := tc.Env["HOME"]; ok {
		return h
	}
	if e.cfg.Env.HomeIsWorkDir && e.cfg.Env.Policy == config.Allowlist {
		return tc.WorkingDir
	}
	for _, kv := range e.cfg.Env.Environ {
		if h, ok := strings.CutPrefix(kv, "HOME="); ok {
			return h
		}
	}
	return ""
}

// hiddenHome is the command's HOME when the sandbox hides it: a home
// below the host's /tmp, which the sandbox replaces with the
// conversation's own; "" otherwise.
func (e *Engine) hiddenHome(tc ToolContext) string {
	h := e.home(tc)
	if h == "/tmp" || strings.HasPrefix(h, "/tmp/") {
		return h
	}
	return ""
}

// homeNote says that a failed sandboxed command's HOME is hidden, when
// its output names HOME or something git, ssh or a package manager keeps
// there; "" otherwise.
func (e *Engine) homeNote(tc ToolContext, out string) string {
	h := e.hiddenHome(tc)
	if h == "" || !mentions(out, []string{h, "Author identity unknown", "Please tell me who you are", "HOME", "~/"}) {
		return ""
	}
	return "[sandbox: HOME (" + h + ") is below the host's /tmp, which the sandbox replaces with the conversation's own /tmp: " +
		"the home directory and what git, ssh and package managers keep there are not visible; set HOME to a directory outside /tmp " +
		"(for git: pass the identity with git -c user.name=… -c user.email=…)]"
}

// homeDescription is the description's line about a hidden HOME ("" when
// it is visible).
func (e *Engine) homeDescription(tc ToolContext) string {
	h := e.hiddenHome(tc)
	if h == "" {
		return ""
	}
	return "\nHOME (" + h + ") is below the host's /tmp, so the sandbox hides it: its files (git identity, ssh keys, tool settings) are not there."
}

// outputBudget is the description's sentence on how much output a result
// shows: "Output over 128 KiB is cut in the middle: the result shows its
// first 32 KiB and last 96 KiB, and names a file with all of it." (the
// shares of Max that package truncate keeps by default), or of
// tc.OutputMax when it is smaller.
func (e *Engine) outputBudget(tc ToolContext) string {
	o := e.cfg.Output
	limit := int64(o.Max)
	if tc.OutputMax > 0 && tc.OutputMax < o.Max {
		limit = int64(tc.OutputMax)
	}
	spool := ", and names a file with all of it."
	if o.SpoolCap < 0 {
		spool = "."
	}
	switch o.Truncation {
	case config.TruncateHead:
		return "Output over " + humanBytes(limit) + " is cut: the result shows its first " + humanBytes(limit) + spool
	case config.TruncateTail:
		return "Output over " + strconv.FormatInt(limit, 10) + " characters is cut: the result shows its last " + strconv.FormatInt(limit, 10) + " characters" + spool
	}
	head := max(limit/4, 1)
	return "Output over " + humanBytes(limit) + " is cut in the middle:\nthe result shows its first " + humanBytes(head) + " and last " + humanBytes(limit-head) + spool
}
