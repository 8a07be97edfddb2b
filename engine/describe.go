package engine

// inputSchema is the JSON schema of Input.
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
    },
    "stdin": {
      "type": "string",
      "enum": ["null", "pipe"],
      "default": "null",
      "description": "pipe: the command reads input sent later with bash_write (mode background, or with yield_ms); null: stdin is /dev/null"
    },
    "tty": {
      "type": "boolean",
      "default": false,
      "description": "Run on a terminal (for REPLs and prompts that need one); bash_write then sends keys, e.g. \\u0003 for Ctrl-C. Only with mode background or yield_ms"
    },
    "yield_ms": {
      "type": "integer",
      "minimum": 1,
      "description": "Return after this many ms with the output so far; the command keeps running as a background job"
    },
    "network": {
      "type": "array",
      "items": {"type": "string"},
      "maxItems": 16,
      "description": "Hosts (host or host:port) a sandboxed command needs beyond its network allowlist; the user is asked once, then they stay granted for the conversation"
    }
  },
  "required": ["command"],
  "additionalProperties": false
}`

// InputSchema returns the JSON schema of [Input]: command (required),
// mode (default, slow or background), the optional stdin, tty and
// yield_ms of interactive jobs, and network (hosts to ask for).
func InputSchema() []byte { return []byte(inputSchema) }
