// Package mcpserver serves a bashvisor [engine.Runner] over the Model
// Context Protocol, on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk), so that any MCP client (Claude
// Desktop, Codex, Cursor, the MCP Inspector, agent frameworks) can use it.
//
// [New] returns an *mcp.Server with up to nine tools (bash_undo,
// bash_redo and bash_review only when the Runner has engine.Engine's Undo, Held and
// Review methods and [Options.Sandbox] is workspace-write: other commands
// keep no undo steps and hold nothing; bash_forward only with
// [Options.Forward] and a Runner with engine.Engine's Forward method). Every result's text content is the text
// the engine designed for the model; its fields come as structuredContent
// only when asked for (see "What the model reads"):
//
//   - bash {command, mode?, stdin?, tty?, yield_ms?}: input schema exactly
//     [engine.InputSchema] (mode is an explicit enum
//     default/slow/background; stdin "pipe", tty and yield_ms make
//     interactive jobs, see [engine.Input]), description
//     [engine.Engine.Description] ending with <pwd>DIR</pwd> (and the
//     sandbox constraints when restricted). The result's text content is
//     [engine.Result.Output] (its fields: the [engine.Result]), isError
//     true unless the status is ok or started.
//   - bash_jobs {}: the conversation's background jobs, one line each
//     (fields: {"jobs": [...]} of [engine.JobInfo]).
//   - bash_output {job_id, tail_bytes?, offset?, limit?, wait_ms?}: a slice
//     of a job's output and its status. Without tail_bytes or offset/limit
//     it returns the last 32 KiB; at most 128 KiB per
//     call (Options.OutputMax: less for Codex and Claude Code). The text starts with a status line naming the byte range shown
//     and, when more follows, ends with the offset to continue from.
//     wait_ms (at most 30 s) is a long poll: it first waits until the job
//     has output past offset (without offset: past its size when the call
//     arrived) or has ended.
//   - bash_write {job_id, input?, close?, yield_ms?}: sends input to a job
//     started with stdin "pipe" or tty (on a terminal, keys: "\u0003" is
//     Ctrl-C), closes its stdin when close is set, then waits up to
//     yield_ms (default 250 ms; at most 30 s) for new
//     output: once some arrived, until the job is quiet for 100 ms, ends,
//     or the time is up. It answers like bash_output, from the job's size
//     before the write. A job that ended, has no pipe, or belongs to
//     another conversation is an error result that says so.
//   - bash_kill {job_id}: terminates a job's process group with the grace
//     sequence (needed in restricted mode, where one command cannot signal
//     another's processes) and returns its final state.
//   - bash_undo {steps? | turn? | paths?}: restores the workspace to before
//     the last steps (default 1) workspace-write commands of the
//     conversation that changed it, every command of a turn (a call's
//     _meta "bashvisor/turn" names its turn), or the given files of the
//     last command that changed them; or refuses, changing nothing,
//     naming the files changed again since (fields: [engine.UndoResult]).
//   - bash_redo {}: puts back what the last undo took, until a new change
//     lands.
//   - bash_review {action, id?, digest?}: lists the conversation's change
//     sets held for review (list), applies one exactly as its digest names
//     it (accept; after the user approves it through elicitation when the
//     client supports it) or discards it (reject).
//   - bash_forward {port}: checks that something listens on the port in
//     the conversation's sandbox and returns a URL of the forward origin
//     (another listener than /mcp's), /forward/NAME/PORT/ with a
//     one-time code for a browser, which [Handler] serves as a reverse
//     proxy to it for the conversation's principal (see [Options.Forward]).
//
// [Handler] serves a server over streamable HTTP for mounting on any mux;
// `bashvisor mcp` serves it over stdio or, with -http, at /mcp (and
// /metrics with -metrics). The results of bash, bash_output and
// bash_write link the full output as an MCP resource when the call asks
// for the result's fields (see "Full outputs as resources").
//
// # What the model reads
//
// Clients hand the model a result's text content, except that several
// (Claude Code, Codex) hand it JSON.stringify(structuredContent) instead
// whenever a result has structured content. So by default no result has
// any, and no tool declares an output schema (a tool that declares one
// must give every result structured content): every client's model reads
// the same designed text, which never repeats the command. Programs that
// want the fields ask for them: [Options.Structured] (`bashvisor mcp
// -structured`) gives every result its fields and declares the output
// schemas ([OutputSchema] is the bash tool's); a call whose _meta has
// "bashvisor/structured": true gets its own result's fields (the model
// never sees _meta).
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
// _meta["bashvisor/call_id"]; on a fleet a call id runs at
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
// is also cancelled when the HTTP request carrying it goes away (the
// middleware [Handler] adds to the server does it): the handler keeps no
// event store, so that response could never be delivered.
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
// _meta: "bashvisor/output", at most 16 KiB (as engine.Progress.Output)
// of valid UTF-8, the latest when there was more, and "bashvisor/skipped",
// the bytes of the gap before it, so that without gaps the notifications
// together are the whole output; the output after the last
// tick is sent in one more notification before the result. The engine's
// callback never blocks on the client: snapshots accumulate (bounded) and
// a per-call goroutine sends them. A call that sent notifications pings
// the client (on the call's own stream) before it answers, and waits for
// the reply (at most 3 s): the official TypeScript SDK runs a
// notification's handler one microtask after it read the message but
// forgets the call's progress handler as soon as it reads the result, so
// a last notification that arrived together with the result was dropped
// ("unknown token"); a client answers the ping only after it handled
// everything before it. Stateless HTTP (2026-07-28) cannot ping; there
// the notifications and the result share one response stream.
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
// random key) over the conversation (and so the principal), directory,
// mode, command and a 10-minute
// expiry, so an answer cannot be replayed for another command. Clients
// without elicitation (or with [Options.DisableElicitation]) get the
// needs_approval result as it is.
//
// Principals: every call is made by a principal. Over HTTP, [Handler]
// authenticates each request and takes the principal from its credentials:
// a bearer token of a token file (package mcpserver/bearer's TokenFile:
// "PRINCIPAL TOKEN" lines, read again when the file changes), an OAuth 2.1
// access token of an issuer (bearer.OAuthVerifier: a JWT checked against
// the issuer's keys, for this resource; principal "oauth:SUBJECT";
// bearer.ProtectedResourceMetadata tells clients where to get one), any
// other [HTTPOptions.Verifier], [HTTPOptions.Token] (principal "default"),
// or no authentication when [HTTPOptions.NoAuth] says so explicitly
// (principal "anonymous"); Handler refuses to be built with none of these.
// A principal's name is 1 to 256 bytes of UTF-8 without spaces or control
// characters. A stdio or in-memory session is the one principal
// [Options.Principal] ("local").
// The principal reaches the engine as [engine.ToolContext.Principal].
//
// Conversations belong to a principal: the engine's conversation id is the
// principal (path-escaped) and the conversation's name, "alice/build", so
// that no job id, resource URI, conversation name or session id of one
// principal reaches another's jobs, outputs or input, whatever it guesses.
// Which conversation a call is in:
//
//   - A call that names one, with the HTTP header
//     "Bashvisor-Conversation: build" or the _meta key
//     "bashvisor/conversation" (both: they must agree), is in that
//     conversation of its principal, from any session or none: a name is
//     1 to 128 of A-Z a-z 0-9 . _ -, starting with a letter or digit. A named
//     conversation ends (its commands and jobs end) after
//     [Options.ConversationIdle] (30 minutes) without a call in it; at
//     most [Options.MaxConversations] (1024) are in use at once.
//   - Otherwise, a call of a streamable HTTP session (protocol up to
//     2025-11-25) is in the session's own conversation,
//     "PRINCIPAL/~HASH" (16 hex digits of the SHA-256 of the session id:
//     logs and output paths never show the id, which authenticates the
//     session), which ends with the session: when the client sends
//     DELETE or the session is closed as idle
//     ([HTTPOptions.SessionTimeout]).
//   - Otherwise (a stateless request, or any session with
//     [Options.SharedConversation]) it is in its principal's own
//     conversation "PRINCIPAL/mcp" ([Options.ConversationID]), which
//     the server never ends.
//   - Over stdio the conversation is [Options.ConversationID] itself
//     ("mcp"), and a named one ConversationID/NAME.
//
// The job tools see only the jobs of the call's conversation; the engine
// does the scoping ([engine.ToolContext]).
//
// Stateless HTTP: [Handler] serves protocol 2026-07-28 statelessly (each
// request stands alone, carrying its protocol version and client
// capabilities in _meta; no session, no initialize), which is what lets a
// fleet of fronts sit behind an ordinary load balancer, and keeps serving
// clients of 2025-11-25 and before with sessions, as they expect. A
// request with a session id goes to its session; an initialize of an older
// protocol opens one; anything else, server/discover included, is served
// statelessly. Over stateless HTTP the server cannot send requests to the
// client: approvals use the input-required result (see Approval), and
// progress notifications travel on the call's own response stream.
//
// Full outputs as resources: when the call asks for the result's fields
// (Options.Structured), a truncated bash result carries, after its
// text, a resource link to the whole output
// (bashvisor://conversation/NAME/outputs/ID, on a fleet readable
// through any front), and every result about a
// background job a link to the job's output
// (bashvisor://conversation/NAME/jobs/JOB). resources/read serves them to
// the same principal (and a session's conversation only to its session),
// in ranges with ?offset=N&length=M, at most 4 MiB a read, the content's
// _meta giving the offset served ("bashvisor/offset"), the size
// ("bashvisor/size") and, when more follows, the URI of the rest
// ("bashvisor/next"); resources/list lists the call's conversation's. Offsets and sizes count the files' bytes. A
// job's output reads as the model reads it from bash_output (rendered:
// escape sequences and control bytes removed, a terminal job as its
// terminal's text; see engine.JobOutput); a full output is the file's
// bytes as UTF-8 (invalid bytes become U+FFFD), the raw copy of what the
// result showed rendered. A conversation keeps its 16 newest full outputs reachable, as
// long as the engine keeps their files (Config.SpoolKeep); with a fleet
// (cluster.Client) a full output's file is on the executor and a front can
// serve it only if it can read that path. Job outputs are read through the
// Runner and work everywhere.
//
// HTTP security: the go-sdk's DNS-rebinding protection stays on (a request
// reaching a loopback address with a non-loopback Host gets 403); browser
// requests whose Origin is neither the server's own nor listed in
// [HTTPOptions.AllowedOrigins] get 403, as do requests that Sec-Fetch-Site
// marks cross-site; a request without valid credentials gets 401 (403
// without a required scope) with a WWW-Authenticate challenge naming the
// protected resource metadata when there is some. Refusals close the
// connection. Tokens are compared in constant time. A session belongs to
// the principal that opened it: another principal naming its id gets 404,
// as for a session that does not exist.
//
// Limits a client can hit (each answered with a reason it can act on).
// Those that count per principal are there so that one principal, however
// many sessions or conversations it opens, cannot take what the others
// need: a principal at its own cap is refused naming that cap while the
// others are served.
//
//   - a request body over 4 MiB (e.g. a large
//     bash_write input): 413 and the connection closed; split the input
//     into several writes;
//   - a body that does not arrive within [HTTPOptions.ReadTimeout] (30 s):
//     408;
//   - [HTTPOptions.MaxSessions] sessions open (256): 503 with
//     Retry-After for a new one; [HTTPOptions.MaxSessionsPerPrincipal]
//     (64) of one principal: 429 naming the principal's cap;
//   - a principal opening sessions faster than [HTTPOptions.SessionRate]
//     (4 a second, in bursts of 64): 429 with Retry-After, the seconds to
//     wait;
//   - a session idle for [HTTPOptions.SessionTimeout] (30 min): closed,
//     its conversation ended; the next request gets 404;
//   - [Options.MaxConversations] named conversations in use (1024), or
//     [Options.MaxConversationsPerPrincipal] of one principal (256), or a
//     principal opening them faster than [Options.ConversationRate] (4 a
//     second, in bursts of 64): a "busy" error result for a call naming a
//     new conversation, saying which;
//   - the engine's admission control (engine.Config.Admission, see
//     config.Admission): a call waits until what is scarce (the CPUs,
//     memory, processes) allows it to run, fairly between principals and
//     between the conversations of a principal, or gets a "busy" result
//     naming the cap of its conversation, its principal or the host that
//     it reached, with the counts;
//   - bash_output and bash_write return at most 128 KiB a call (less
//     for Codex and Claude Code: Options.OutputMax), a
//     resource read at most 4 MiB;
//   - with [LimitListener], connections over the cap get 503.
//
// HTTP bounds: the http.Server is the embedder's: give it
// ReadHeaderTimeout and IdleTimeout, serve it on [LimitListener] to cap
// connections, and leave ReadTimeout and WriteTimeout unset (they would cut
// or cancel long calls). `bashvisor mcp` does so (10s, 30s, 1024
// connections).
// [MetricsHandler] serves an engine's Prometheus metrics behind the same
// authentication.
package mcpserver
