package engine

import (
	"strings"

	"github.com/bashvisor/bashvisor/sandbox"
)

// inputSchema is the JSON schema of Input (SPEC §2.1).
const inputSchema = `{
  "type": "object",
  "properties": {
    "command": {
      "type": "string",
      "description": "Shell command to execute via bash -c"
    },
    "mode": {
      "type": "string",
      "enum": ["default", "slow", "background"],
      "default": "default",
      "description": "default: foreground with the normal timeout; slow: foreground with the extended timeout, required for builds, tests, installs and downloads; background: run detached and return at once with the pid and an output file"
    }
  },
  "required": ["command"],
  "additionalProperties": false
}`

// InputSchema returns the JSON schema of [Input] (SPEC §2.1).
func InputSchema() []byte { return []byte(inputSchema) }

// Description returns the tool description for the model (SPEC §2.1,
// REQ-BASH-009), ending with <pwd>tc.WorkingDir</pwd>. In restricted mode
// it states the sandbox constraints.
func (e *Engine) Description(tc ToolContext) string {
	var b strings.Builder
	b.WriteString(`Executes shell commands via bash -c, returning combined stdout/stderr.
Bash state changes (working dir, variables, aliases) don't persist between calls.

Modes:
- default: runs in the foreground and is stopped after ` + humanDuration(e.cfg.Timeout) + `.
- slow: runs in the foreground and is stopped after ` + humanDuration(e.cfg.SlowTimeout) + `.
- background: returns immediately with the process id and an output file;
  use it for servers and demos that need to stay running.

MUST use mode=slow for potentially slow commands: builds, downloads,
installs, tests, or any other substantive operation.

Commands run without a terminal and with stdin closed: interactive prompts,
editors and pagers do not work. Output over 128 KiB is cut in the middle
(the full output is saved to a file named in the result).

IMPORTANT: Keep commands concise. The command input must be less than 60k tokens.
For complex scripts, write them to a file first and then execute the file.
`)
	if tc.Restricted {
		if e.caps.Available() {
			b.WriteString("\n" + strings.TrimSpace(sandbox.DescriptionWith(e.cfg.Sandbox)) + "\n")
		} else {
			b.WriteString("\nRestricted mode was requested but this host cannot enforce it (" + e.caps.Reason +
				"): every command returns an error.\n")
		}
	}
	b.WriteString("\n<pwd>" + tc.WorkingDir + "</pwd>")
	return b.String()
}
