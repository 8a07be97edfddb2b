// Package mcpserver serves a bashvisor [engine.Runner] over the Model
// Context Protocol, on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), so that any MCP client (Claude
// Desktop, Codex, Cursor, the MCP Inspector, agent frameworks) can use it.
//
// [New] returns an *mcp.Server with five tools:
//
//   - bash {command, mode?, stdin?, tty?, yield_ms?}: input schema exactly
//     [engine.InputSchema] (mode is an explicit enum
//     default/slow/background; stdin "pipe", tty and yield_ms make
//     interactive jobs, see [engine.Input]), description
//     [engine.Engine.Description] ending with <pwd>DIR</pwd> (and the
//     sandbox constraints when restricted). The result's text content is
//     [engine.Result.Output], its structuredContent the Result
//     as JSON (an output schema is declared), isError true unless the
//     status is ok or started.
//   - bash_jobs {}: the conversation's background jobs (job_id, pid,
//     command, display, status, started, bytes, ...), as {"jobs": [...]}.
//   - bash_output {job_id, tail_bytes?, offset?, limit?, wait_ms?}: a slice
//     of a job's output and its status. Without tail_bytes or offset/limit
//     it returns the last 32 KiB ([DefaultTailBytes]); at most 128 KiB per
//     call. The text starts with a status line naming the byte range shown
//     and, when more follows, ends with the offset to continue from.
//     wait_ms (at most 30 s) is a long poll: it first waits until the job
//     has output past offset (without offset: past its size when the call
//     arrived) or has ended.
//   - bash_write {job_id, input?, close?, yield_ms?}: sends input to a job
//     started with stdin "pipe" or tty (on a terminal, keys: "\u0003" is
//     Ctrl-C), closes its stdin when close is set, then waits up to
//     yield_ms (default 250 ms, [DefaultWriteWait]; at most 30 s) for new
//     output: once some arrived, until the job is quiet for 100 ms, ends,
//     or the time is up. It answers like bash_output, from the job's size
//     before the write. A job that ended, has no pipe, or belongs to
//     another conversation is an error result that says so.
//   - bash_kill {job_id}: terminates a job's process group with the grace
//     sequence (needed in restricted mode, where one command cannot signal
//     another's processes) and returns its final state.
//
// [Handler] serves a server over streamable HTTP for mounting on any mux;
// `demo mcp` serves it over stdio or, with -http, at /mcp (and /metrics
// with -metrics).
//
// # Choices
//
// Arguments are decoded by hand, not by schema validation, so that every
// malformed call gets a result the model can act on, never a crash or a
// protocol error: status "error" and text "[error: bad input: …]" naming the
// field and what was expected (missing command, wrong types, unknown
// fields, a lone UTF-16 surrogate escape or invalid UTF-8 that JSON decoding
// would silently turn into U+FFFD). The decoded input is then checked by
// [engine.ValidateInput], the engine's own rules: an empty command, one
// longer than [engine.MaxCommandBytes] (131071 bytes, Linux's limit on one
// execve argument), NUL bytes, an unknown mode. The error result echoes at
// most 1 KiB of the command. A panic in a handler becomes an "[error:
// internal error: …]" result.
//
// Call ids: a bash call may carry the model's tool-use id in
// _meta["bashvisor/call_id"] ([MetaCallID]); on a fleet a call id runs at
// most once per conversation, so an agent server may safely send a call
// again after a failure of its own.
//
// Stdio: [StdioTransport] answers a line that is not a JSON-RPC message
// with a JSON-RPC error (-32700 or -32600) and keeps the session, where the
// go-sdk's own stdio transport would end it and lose every background job.
//
// Cancellation: the go-sdk cancels a handler's context on
// notifications/cancelled and when the session's connection breaks (stdin
// EOF, a closed pipe); that context is the one passed to
// [engine.Engine.Run], which then terminates the command's process group
// with the grace sequence and returns status "cancelled". Over HTTP a call
// is also cancelled when the HTTP request carrying it goes away: the
// handler keeps no event store, so that response could never be delivered.
// [Options.BaseContext] cancels every call at shutdown (closing an MCP
// session waits for its calls). [Options.OnResult] sees every result,
// including those of cancelled calls the client no longer reads.
//
// Concurrency: the go-sdk runs each tools/call in its own goroutine (it does
// not serialise calls per session), and the engine serves any number of
// calls at once, so a slow call never delays another.
//
// Progress: when a call carries a progress token, the engine's progress
// snapshots become notifications/progress with progress = elapsed seconds
// (strictly increasing) and message "12.0s, 3.4 KiB, last: LINE", at most
// one per [Options.ProgressInterval] (default 1s). Each also carries the
// output since the previous one, on the message's following lines and in
// _meta ([MetaOutput], [MetaSkipped]): at most 16 KiB
// ([engine.ProgressOutputMax]) of valid UTF-8, the latest when there was
// more (the gap counted in MetaSkipped), so that without gaps the
// notifications together are the whole output; the output after the last
// tick is sent in one more notification before the result. The engine's
// callback never blocks on the client: snapshots accumulate (bounded) and
// a per-call goroutine sends them.
//
// Approval: when the engine answers "needs_approval" (a permission rule
// said "ask") and the client declared the elicitation capability, the
// server asks the user to approve the exact command (with mode and working
// directory). Accept runs it with ToolContext.Approved; decline returns
// status "denied"; cancel (dismissed) returns the needs_approval result.
// Clients on protocol versions before 2026-07-28 get an elicitation/create
// request while the call waits; newer clients, which forbid
// server-initiated requests, get an input-required result and retry the
// call with the answer and an opaque request state, an HMAC (per-server
// random key) over conversation, directory, mode, command and a 10-minute
// expiry, so an answer cannot be replayed for another command. Clients
// without elicitation (or with [Options.DisableElicitation]) get the
// needs_approval result as it is.
//
// Conversations: the job tools see only the jobs of the calling session's
// conversation; the engine does the scoping ([engine.ToolContext]). A
// session without a session id (stdio) is the conversation
// [Options.ConversationID] (default "mcp"). Each streamable HTTP session is
// a conversation of its own, derived from a hash of its session id, and
// ends with the session: when the client sends DELETE or the session is
// closed as idle ([HTTPOptions.SessionTimeout]), the server calls
// [engine.Runner.EndConversation], which ends its commands and background
// jobs. [Options.SharedConversation] puts every session in one
// conversation instead, never ended by the server.
//
// HTTP security: the go-sdk's DNS-rebinding protection stays on (a request
// reaching a loopback address with a non-loopback Host gets 403); browser
// requests whose Origin is neither the server's own nor listed in
// [HTTPOptions.AllowedOrigins] get 403, as do requests that Sec-Fetch-Site
// marks cross-site; with [HTTPOptions.Token] every request needs
// "Authorization: Bearer TOKEN" (compared in constant time) or gets 401.
// Both refusals close the connection. `demo mcp -http` binds where it is
// told and refuses a non-loopback address without a token.
//
// HTTP bounds: [Handler] caps the sessions open at once
// ([HTTPOptions.MaxSessions], default 256; over it 503 with Retry-After),
// closes sessions idle for 30 minutes, and bounds the reading of a body
// ([HTTPOptions.ReadTimeout], default 30s; then 408). The http.Server is
// the embedder's: give it ReadHeaderTimeout and IdleTimeout, serve it on
// [LimitListener] to cap connections, and leave ReadTimeout and
// WriteTimeout unset (they would cut or cancel long calls). `demo mcp`
// does so (10s, 30s, 1024 connections). [MetricsHandler] serves an
// engine's Prometheus metrics behind the same token.
package mcpserver
