package mcpserver

import "encoding/json"

// OutputSchema returns the bash tool's output schema: [engine.Result] as
// JSON, the structuredContent of a bash result that asked for its fields
// (see [Options.Structured]).
func OutputSchema() json.RawMessage { return json.RawMessage(resultOutputSchema) }

// resultOutputSchema describes [engine.Result] as JSON.
const resultOutputSchema = `{
  "type": "object",
  "properties": {
    "status": {"type": "string", "enum": ["ok", "failed", "timed_out", "cancelled", "blocked", "denied", "needs_approval", "error", "started", "lost"]},
    "exit_code": {"type": "integer", "description": "The shell's exit code; 128+n when killed by signal n."},
    "signal": {"type": "string", "description": "The signal that killed the command, e.g. SIGKILL."},
    "output": {"type": "string", "description": "The text the model sees."},
    "truncated": {"type": "boolean"},
    "output_bytes": {"type": "integer", "minimum": 0, "description": "Total bytes the command produced."},
    "full_output_file": {"type": "string", "description": "File holding the complete output when it was truncated."},
    "duration_ms": {"type": "integer", "minimum": 0},
    "queued_ms": {"type": "integer", "minimum": 0, "description": "How long the call waited for a slot before the command started (admission control); its timeout started only then."},
    "command": {"type": "string"},
    "display": {"type": "string", "description": "The command as shown to a person."},
    "pid": {"type": "integer", "description": "Background only: the job's process group id."},
    "output_file": {"type": "string", "description": "Background only: the file the job's output goes to."},
    "job_id": {"type": "string", "description": "Background only: the id for bash_output, bash_write and bash_kill."},
    "cpu_ms": {"type": "integer", "minimum": 0, "description": "CPU time (user + system) of the command's processes in ms, rounded up; exact with cgroups, else the shell's and its waited-for children's. Absent when it did not run."},
    "peak_memory_bytes": {"type": "integer", "minimum": 0, "description": "Most memory the command's processes held at once, page cache included. Absent when it did not run, or without a memory controller."},
    "processes": {"type": "integer", "minimum": 0, "description": "Most processes and threads alive at once, the shell included (not a count of processes started). Absent without a pids controller."},
    "oom_killed": {"type": "boolean", "description": "The kernel's OOM killer killed a process of the command (at its memory limit or in a system-wide shortage)."},
    "changes": {"type": "array", "items": ` + changeSchema + `, "description": "workspace-write: what the command changed in the workspace (applied when it ended)."},
    "changes_omitted": {"type": "integer", "minimum": 0, "description": "Changes left out of changes (it lists at most 1000)."},
    "refused": {"type": "array", "items": ` + refusalSchema + `, "description": "workspace-write: changes policy kept out of the workspace (git configuration, hooks, ...)."},
    "held": ` + heldSchema + `,
    "network": {"type": "array", "description": "Sandbox with allow-net: per destination, what the command did through its egress, the busiest first (port 0: a name the resolver refused).", "items": {"type": "object", "properties": {
      "host": {"type": "string"}, "port": {"type": "integer", "minimum": 0},
      "bytes_out": {"type": "integer", "minimum": 0, "description": "Bytes the destination acknowledged."},
      "bytes_in": {"type": "integer", "minimum": 0, "description": "Bytes received from it."},
      "denied": {"type": "integer", "minimum": 0, "description": "Attempts refused."}}, "required": ["host", "port", "bytes_out", "bytes_in"]}},
    "listening": {"type": "array", "description": "Sandbox: the TCP ports the conversation's commands and jobs listen on in its loopback network (bash_forward reaches them).", "items": {"type": "object", "properties": {
      "port": {"type": "integer", "minimum": 1}, "pid": {"type": "integer", "description": "A process holding the socket."},
      "job": {"type": "string", "description": "The background job whose process group holds it."}}, "required": ["port", "pid"]}}
  },
  "required": ["status", "output"]
}`

// jobInfoSchema describes [engine.JobInfo] as JSON.
const jobInfoSchema = `{
  "type": "object",
  "properties": {
    "job_id": {"type": "string"},
    "pid": {"type": "integer"},
    "command": {"type": "string"},
    "display": {"type": "string"},
    "conversation_id": {"type": "string"},
    "status": {"type": "string", "enum": ["running", "completed", "failed", "killed", "lost"]},
    "exit_code": {"type": "integer"},
    "reason": {"type": "string", "description": "Why the job was killed."},
    "started": {"type": "string", "format": "date-time"},
    "ended": {"type": "string", "format": "date-time"},
    "bytes": {"type": "integer", "minimum": 0, "description": "Bytes of output so far."},
    "output_file": {"type": "string"},
    "tty": {"type": "boolean", "description": "The job runs on a terminal: its output reads as the terminal's text."},
    "cpu_ms": {"type": "integer", "minimum": 0, "description": "CPU time of the job's processes so far (final once it ended), in ms."},
    "peak_memory_bytes": {"type": "integer", "minimum": 0, "description": "Most memory the job's processes held at once so far."},
    "processes": {"type": "integer", "minimum": 0, "description": "Most processes and threads alive at once so far."},
    "oom_killed": {"type": "boolean", "description": "The kernel's OOM killer killed a process of the job."},
    "changes": {"type": "array", "items": ` + changeSchema + `, "description": "workspace-write: what the job changed in the workspace so far (applied at checkpoints while it runs)."},
    "changes_omitted": {"type": "integer", "minimum": 0},
    "refused": {"type": "array", "items": ` + refusalSchema + `, "description": "workspace-write: changes policy kept out of the workspace."},
    "held": ` + heldSchema + `
  },
  "required": ["job_id", "status"]
}`

const jobsInputSchema = `{"type": "object", "properties": {}, "additionalProperties": false}`

const jobsOutputSchema = `{
  "type": "object",
  "properties": {"jobs": {"type": "array", "items": ` + jobInfoSchema + `}},
  "required": ["jobs"]
}`

const outputInputSchema = `{
  "type": "object",
  "properties": {
    "job_id": {"type": "string", "description": "The job_id of a background command's result."},
    "tail_bytes": {"type": "integer", "minimum": 1, "description": "Return the last N bytes of the job's output (default 32768 when offset and limit are not given)."},
    "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to read from (to page through the output)."},
    "limit": {"type": "integer", "minimum": 0, "maximum": 131072, "description": "Bytes to read from offset (default and maximum 131072)."},
    "wait_ms": {"type": "integer", "minimum": 0, "maximum": 30000, "description": "First wait up to this many ms for output past offset (without offset: past the current end) or for the job to end."}
  },
  "required": ["job_id"],
  "additionalProperties": false
}`

const outputOutputSchema = `{
  "type": "object",
  "properties": {
    "job": ` + jobInfoSchema + `,
    "offset": {"type": "integer", "minimum": 0, "description": "Output offset (every byte the job printed counts) of the first byte the output renders."},
    "end": {"type": "integer", "minimum": 0, "description": "Output offset after the last byte the output renders: the offset to read on from."},
    "output": {"type": "string", "description": "The output as text: escape sequences and control bytes removed; a terminal job's as its terminal's text (what changed since offset)."},
    "size": {"type": "integer", "minimum": 0, "description": "Bytes of output so far."},
    "eof": {"type": "boolean", "description": "The output reaches its current end."},
    "skipped": {"type": "integer", "minimum": 0, "description": "Bytes between the offset asked for and offset that the job's capped output file dropped (it keeps the first and the newest output)."}
  },
  "required": ["job", "offset", "end", "output", "size", "eof"]
}`

const killInputSchema = `{
  "type": "object",
  "properties": {
    "job_id": {"type": "string", "description": "The job_id of a background command's result."}
  },
  "required": ["job_id"],
  "additionalProperties": false
}`

const writeInputSchema = `{
  "type": "object",
  "properties": {
    "job_id": {"type": "string", "description": "The job_id of a background job started with stdin \"pipe\" or tty true."},
    "input": {"type": "string", "description": "The text to send, e.g. \"yes\\n\"; on a terminal, keys (\"\\r\" is Enter, \"\\u0003\" Ctrl-C)."},
    "close": {"type": "boolean", "default": false, "description": "Close the job's stdin after the input (end of file; on a terminal, Ctrl-D)."},
    "yield_ms": {"type": "integer", "minimum": 0, "maximum": 30000, "default": 250, "description": "How long to wait for new output before returning."}
  },
  "required": ["job_id"],
  "additionalProperties": false
}`
