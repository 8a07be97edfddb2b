package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
)

// Tool names registered by New.
const (
	toolBash   = "bash"
	toolJobs   = "bash_jobs"
	toolOutput = "bash_output"
	toolKill   = "bash_kill"
	toolWrite  = "bash_write"
)

// defaultTailBytes is how much of a job's output bash_output returns when
// the call gives neither tail_bytes nor offset/limit: the last 32 KiB.
const defaultTailBytes = 32 << 10

// maxReadBytes is the most bash_output returns in one call (the tool's
// output bound).
const maxReadBytes = 128 << 10

// Options configures [New]. The zero value serves the current directory,
// unrestricted, with progress notifications at most once a second.
type Options struct {
	// WorkingDir is the directory commands run in and the <pwd> of the tool
	// description (default: the process's working directory).
	WorkingDir string
	// Sandbox is the sandbox every command runs in (the zero value: none);
	// the tool description then states its rules in two lines.
	Sandbox engine.Sandbox
	// ConversationID names the default conversation: a stdio (or
	// in-memory) session's, whose engine conversation id it is, and over
	// HTTP each principal's own conversation ("alice/mcp"), used by
	// stateless requests that name none and, with SharedConversation, by
	// every session. Default "mcp". See the package documentation,
	// "Conversations", for the ids of the others.
	ConversationID string
	// SharedConversation puts every HTTP session of a principal in the
	// principal's own conversation: all its clients see, read and kill
	// every job of the principal, as for a single user with several
	// clients. By default (false) each streamable HTTP session is its own
	// conversation, which ends when the session ends: closed by the client
	// (DELETE), or by the server after HTTPOptions.SessionTimeout without
	// a request. Ending it ends its running commands and background jobs
	// with the grace sequence and removes its output files
	// ([engine.Runner.EndConversation]). A principal's own conversation,
	// like a stdio session's, is never ended by the server: it lives until
	// the engine shuts down.
	SharedConversation bool
	// Principal is the principal of calls that do not come through
	// [Handler] (stdio, in-memory), given to the engine as
	// ToolContext.Principal (default "local").
	Principal string
	// ConversationIdle ends a named conversation (one a client named with
	// the Bashvisor-Conversation header or _meta key
	// "bashvisor/conversation") after this long without
	// a call in it (default 30m; negative: never): its commands and
	// background jobs end, as a session's do with the session.
	ConversationIdle time.Duration
	// MaxConversations caps the named conversations in use at once, over
	// all principals (default 1024; negative: no cap). A call that would
	// open one more gets a "busy" error result.
	MaxConversations int
	// MaxConversationsPerPrincipal caps those of one principal (default
	// 256, a quarter of the default MaxConversations; negative: no cap): a
	// call of a principal at its cap that names a new conversation gets a
	// "busy" error result naming the principal's cap, while other
	// principals open theirs as usual.
	MaxConversationsPerPrincipal int
	// ConversationRate bounds how fast one principal opens new named
	// conversations (default 4 a second, in bursts of up to 64;
	// PerSecond negative: no bound); a call beyond it gets a "busy" error
	// result saying when to retry. Calls in open conversations are not
	// limited.
	ConversationRate Rate
	// Env holds per-call environment overrides (see [engine.ToolContext]).
	Env map[string]string
	// ProgressInterval is the minimum spacing of progress notifications
	// for one call (default 1s). The engine reports about every
	// Config.ProgressInterval; the slower of the two wins.
	ProgressInterval time.Duration
	// Logger receives the server's and the go-sdk's logs (default: discard).
	// Nothing is written to stdout.
	Logger *slog.Logger
	// Structured gives every tool result its fields as structuredContent
	// (the bash tool's an [engine.Result], bash_jobs' a list of
	// [engine.JobInfo], …) and declares each tool's output schema, for
	// programs that read the fields. Off by default: clients such as Claude
	// Code and Codex hand the model JSON.stringify(structuredContent)
	// instead of the text content when a result has one, so the model
	// would read an escaped copy of the output beside the command, twice,
	// and usage figures, in place of the designed text. Without it a call
	// still gets its result's fields when its request's _meta has
	// "bashvisor/structured": true (the model never sees _meta). The
	// resource links to a job's output and to a truncated result's whole
	// output come with the fields, never without them.
	Structured bool
	// OutputMax bounds the output a bash result shows, in bytes (cut as
	// the engine's Config.Output says, never beyond its Output.Max; the
	// result's header says what is shown), and what bash_output and
	// bash_write return a call. 0 (the default) fits it to the client that
	// initialized the session (its clientInfo.name), so that the model
	// reads the engine's cut, not the client's: Codex
	// ("codex-mcp-client"), which passes on about 12,000 characters, gets
	// 10,000; Claude Code ("claude-code"), which replaces a result over
	// 25,000 tokens with an error, 40,000; any other client, and a
	// session without clientInfo, the engine's. The bash tool's
	// description in tools/list states the session's. Negative: the
	// engine's for every client.
	OutputMax int
	// DisableElicitation returns "needs_approval" results as they are, even
	// to clients that support elicitation.
	DisableElicitation bool
	// Name and Version identify the server to clients (default "bashvisor"
	// and "dev").
	Name, Version string
	// BaseContext, when set, bounds every tool call: when it is done,
	// in-flight calls are cancelled (their commands terminated with the
	// grace sequence). Use it to stop quickly at shutdown, since closing an
	// MCP session waits for in-flight calls.
	BaseContext context.Context
	// Forward, when set, is the URL of the forward origin
	// ("http://127.0.0.1:8766"): another listener than /mcp's, where
	// [Handler] is mounted at "/forward/" (and nothing else). It offers
	// the tool bash_forward (with a Runner that has Engine's Forward
	// method), which gives the user a URL for a port a server of the
	// conversation listens on in its sandbox, on an origin of that
	// forward's own below Forward's host (fw-LABEL.localhost:PORT for a
	// loopback Forward; see forwardPrefix) +
	// /forward/NAME/PORT/?bashvisor_code=CODE, which Handler serves as a
	// reverse proxy into that conversation's network, for its principal
	// only. A program sends the same Authorization header as for /mcp; a
	// browser opens the URL once (the code is random, single-use, good
	// for 10 minutes and for that port only) and then holds a random
	// grant, not the token, in an HttpOnly cookie of that origin and
	// path, which lives as long as the token of the call. Forward paths
	// answer only requests whose Host is Forward's or a forward's, so
	// that forwarded pages are never of /mcp's origin (where they could
	// call /mcp as the person). Neither token, code nor cookie reaches
	// the conversation's server. The tool answers that it needs HTTP
	// until a Handler serves the server: over stdio, mount
	// Handler(srv, HTTPOptions{NoAuth: true}) on Forward's listener alone
	// (a browser then gets in by the code only). New panics when Forward
	// is not an http or https origin.
	Forward string
	// OnResult, when set, is called with the result of every bash call
	// before it is sent, including results the client will not read
	// because it cancelled the call. It must not block.
	OnResult func(conversationID string, in engine.Input, r engine.Result)
}

// server holds what the tool handlers share.
type server struct {
	e    engine.Runner
	o    Options
	log  *slog.Logger
	key  []byte   // signs approval request state
	used sync.Map // nonces of approval states already used -> expiry (unix)
	run  runFunc
	// convs tracks session and named conversations, to end them.
	convs conversations
	// outputs holds the full outputs served as resources.
	outputs fullOutputs
	// grants holds the hosts a person granted each conversation (an
	// approved call's Input.Network), added to its later calls'
	// Sandbox.Network until the conversation ends.
	grantsMu sync.Mutex
	grants   map[string][]string
}

// runFunc is [engine.Runner.Run]; tests substitute it to reach statuses the
// engine's configuration cannot produce.
type runFunc func(context.Context, engine.ToolContext, engine.Input) engine.Result

// New returns an MCP server exposing r (an *engine.Engine, or any
// engine.Runner) as the tools bash, bash_jobs, bash_output, bash_write
// and bash_kill, and bash_undo when r has Engine's Undo method and
// opts.Sandbox is workspace-write (the only commands that keep undo
// steps). Serve it with [mcp.Server.Run] over
// [StdioTransport] (stdin and stdout) or over HTTP with [Handler]. One
// server may serve any number of sessions concurrently; calls run
// concurrently.
func New(e engine.Runner, opts Options) *mcp.Server {
	return newServer(e, opts, nil)
}

func newServer(e engine.Runner, opts Options, run runFunc) *mcp.Server {
	_, ms := build(e, opts, run)
	return ms
}

// build makes the server and its MCP server.
func build(e engine.Runner, opts Options, run runFunc) (*server, *mcp.Server) {
	if run == nil {
		run = e.Run
	}
	if opts.WorkingDir == "" {
		if wd, err := os.Getwd(); err == nil {
			opts.WorkingDir = wd
		} else {
			opts.WorkingDir = "."
		}
	}
	if abs, err := filepath.Abs(opts.WorkingDir); err == nil {
		opts.WorkingDir = abs
	}
	if opts.ConversationID == "" {
		opts.ConversationID = "mcp"
	}
	if opts.Principal == "" {
		opts.Principal = principalLocal
	}
	opts.ConversationIdle = orDefault(opts.ConversationIdle, defaultConversationIdle)
	if opts.ConversationIdle == 0 {
		opts.ConversationIdle = -1 // never
	}
	opts.MaxConversations = orDefault(opts.MaxConversations, defaultMaxConversations)
	opts.MaxConversationsPerPrincipal = orDefault(opts.MaxConversationsPerPrincipal, defaultMaxConversationsPerPrincipal)
	opts.ConversationRate = opts.ConversationRate.orDefault(defaultConversationRate)
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = time.Second
	}
	if opts.Name == "" {
		opts.Name = "bashvisor"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	key := make([]byte, 32)
	rand.Read(key)
	s := &server{e: e, o: opts, log: log, key: key, run: run}
	s.convs = conversations{s: s, named: map[string]*namedConversation{}, perPrincipal: map[string]int{}, rate: newRates(opts.ConversationRate)}

	ms := mcp.NewServer(&mcp.Implementation{Name: opts.Name, Title: "bashvisor shell", Version: opts.Version}, &mcp.ServerOptions{
		Logger:       log,
		Capabilities: &mcp.ServerCapabilities{Resources: &mcp.ResourceCapabilities{}},
		SetCacheable: setCacheable,
		Instructions: "Run shell commands with the bash tool. Background commands (mode \"background\", " +
			"or a call that yielded) are listed by bash_jobs, read with bash_output, given input with " +
			"bash_write and stopped with bash_kill.",
	})
	tc := s.toolContext(scope{principal: opts.Principal, conv: opts.ConversationID})
	yes := true
	s.addTool(ms, toolBash, "Bash", e.Description(tc), string(engine.InputSchema()), resultOutputSchema,
		mcp.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &yes}, handle(s, parseBashArgs, s.bash))
	s.addTool(ms, toolJobs, "List background jobs",
		"List this conversation's background jobs (started with mode \"background\"), running and ended: job_id, pid, status, start time, bytes of output, command.",
		jobsInputSchema, jobsOutputSchema, mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}, handle(s, parseNoArgs, s.jobs))
	s.addTool(ms, toolOutput, "Read a background job's output",
		"Read a background job's output and status. By default returns the last 32 KiB; "+
			"tail_bytes sets how much of the end to return, or offset and limit read a byte range "+
			"(at most 128 KiB per call) to page through it. wait_ms (at most 30000) first waits for "+
			"output past offset (or past the current end) or for the job to end.",
		outputInputSchema, outputOutputSchema, mcp.ToolAnnotations{ReadOnlyHint: true}, handle(s, parseOutputArgs, s.output))
	s.addTool(ms, toolKill, "Stop a background job",
		"Stop a background job and every process it started: SIGTERM to its process group, "+
			"SIGKILL after the grace period. Returns the job's final status.",
		killInputSchema, jobInfoSchema, mcp.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true}, handle(s, parseJobID, s.kill))
	s.addTool(ms, toolWrite, "Send input to a background job",
		"Send input to a background job started with stdin \"pipe\" or tty true (on a terminal "+
			"the input is keys: \"\\u0003\" is Ctrl-C, \"\\u0004\" Ctrl-D), optionally close its stdin, then wait "+
			"up to yield_ms (default 250, at most 30000) for its output to settle and return the new output and the job's status.",
		writeInputSchema, outputOutputSchema, mcp.ToolAnnotations{DestructiveHint: &yes, OpenWorldHint: &yes}, handle(s, parseWriteArgs, s.write))
	// Only workspace-write commands keep undo steps.
	if u, ok := e.(undoer); ok && opts.Sandbox.Profile == engine.WorkspaceWrite {
		s.addUndo(ms, u)
	}
	s.addReview(ms, e, opts)
	s.addForward(ms, e)
	s.addResources(ms)
	s.describeBudgets(ms)
	return s, ms
}

// addTool registers a tool: its name, title (also its annotations'),
// description, input and output schemas (see outputSchema), annotations
// and handler.
func (s *server) addTool(ms *mcp.Server, name, title, description, input, output string, ann mcp.ToolAnnotations, h mcp.ToolHandler) {
	ann.Title = title
	ms.AddTool(&mcp.Tool{
		Name:         name,
		Title:        title,
		Description:  description,
		InputSchema:  json.RawMessage(input),
		OutputSchema: s.outputSchema(output),
		Annotations:  &ann,
	}, h)
}

// outputSchema is a tool's output schema when every result carries its
// structured content (Options.Structured), else none: a tool that declares
// one must give every result its structured content.
func (s *server) outputSchema(schema string) any {
	if !s.o.Structured {
		return nil // not a nil json.RawMessage: that would be sent as null
	}
	return json.RawMessage(schema)
}

// safe turns a panic in a tool handler into an error result: the go-sdk
// does not recover them, and one bad call must not take the server down.
func (s *server) safe(h mcp.ToolHandler) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("panic in tool handler", "tool", req.Params.Name, "panic", p, "stack", string(debug.Stack()))
				res, err = errorResult(fmt.Errorf("internal error: %v", p)), nil
			}
		}()
		return h(ctx, req)
	}
}

// Reasons a call's context is cancelled by the server rather than the client.
var (
	errServerStopping = errors.New("server stopping")
	errDisconnected   = errors.New("client disconnected")
)

// callContext derives a call's context: the go-sdk cancels ctx on
// notifications/cancelled and when the session's connection breaks;
// [Handler] ends it with the HTTP request that carried the call; on top of
// that it ends with Options.BaseContext.
func (s *server) callContext(ctx context.Context) (context.Context, func()) {
	b := s.o.BaseContext
	if b == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(b, func() { cancel(errServerStopping) })
	return ctx, func() {
		stop()
		cancel(nil)
	}
}

// toolCall is a tool call past the opening every tool shares (see [handle]):
// its context, also ended by Options.BaseContext, its request, its
// conversation's scope and tool context, and the job its arguments name.
type toolCall struct {
	ctx context.Context
	req *mcp.CallToolRequest
	sc  scope
	tc  engine.ToolContext
	job engine.JobInfo // when the arguments name one (a jobNamer)
}

// jobNamer is arguments that name a job: the opening looks the job up.
type jobNamer interface{ job() string }

// handle makes a tool's handler of its argument parser and its body, with
// the opening every tool shares: parse the arguments (a malformed one is
// an error result wrapping [engine.ErrBadInput]), bound the call's
// context, enter its conversation (left when the body returns), make its
// tool context, and look up the job the arguments name (an unknown one is
// an error result). An error the body returns is an error result; a panic
// one too (safe).
func handle[A any](s *server, parse func(json.RawMessage) (A, error), body func(*toolCall, A) (*mcp.CallToolResult, error)) mcp.ToolHandler {
	return s.safe(func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a, err := parse(req.Params.Arguments)
		if err != nil {
			return errorResult(fmt.Errorf("%w: %w", engine.ErrBadInput, err)), nil
		}
		ctx, done := s.callContext(ctx)
		defer done()
		sc, err := s.scopeOf(ctx, req)
		if err != nil {
			return errorResult(err), nil
		}
		leave, err := s.convs.enter(sc)
		if err != nil {
			return errorResult(err), nil
		}
		defer leave()
		c := &toolCall{ctx: ctx, req: req, sc: sc, tc: s.toolContext(sc)}
		c.tc.OutputMax = s.outputMax(req.Session)
		if c.tc.Turn, err = turnOf(req.Params.Meta); err != nil {
			return errorResult(err), nil
		}
		if n, ok := any(a).(jobNamer); ok {
			if c.job, err = s.e.Job(c.tc, n.job()); err != nil {
				return errorResult(engine.JobError(n.job(), err)), nil
			}
		}
		res, err := body(c, a)
		if err != nil {
			return errorResult(err), nil
		}
		return res, nil
	})
}

// metaStructured is the _meta key of a call that asks for its result's
// fields as structuredContent ([Options.Structured] asks for every call's).
const metaStructured = "bashvisor/structured"

// reply is a tool's result: text for the model; v, the result's fields,
// as structured content, and the resource links after the text only when
// the call asked for them (see [Options.Structured]): Claude Code and
// Codex hand the model a link as text ("[Resource link: …]", or its
// JSON), as long as a short result again.
func (s *server) reply(c *toolCall, text string, v any, links ...mcp.Content) *mcp.CallToolResult {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	if asked, _ := c.req.Params.Meta[metaStructured].(bool); s.o.Structured || asked {
		res.StructuredContent = v
		res.Content = append(res.Content, links...)
	}
	return res
}

// bashArgs are the bash tool's decoded arguments. A malformed one is
// still a bash result (status "error", through Options.OnResult), not a
// tool error: err carries it to the body.
type bashArgs struct {
	in  engine.Input
	err error
}

func parseBashArgs(raw json.RawMessage) (bashArgs, error) {
	in, err := parseBashInput(raw)
	return bashArgs{in, err}, nil
}

func (s *server) bash(c *toolCall, a bashArgs) (*mcp.CallToolResult, error) {
	c.tc.CallID = callID(c.tc.ConversationID, c.req.Params.Meta)
	ctx, req, tc, in := c.ctx, c.req, c.tc, a.in
	if a.err != nil {
		return s.finish(c, in, badInput(in, a.err)), nil
	}
	run := func(approved bool) engine.Result {
		tc := tc
		tc.Approved = approved
		if tok := req.Params.GetProgressToken(); tok != nil {
			p := startProgress(ctx, req.Session, tok, s.o.ProgressInterval, s.log)
			defer p.stop()
			tc.Progress = p.update
		}
		r := s.run(ctx, tc, in)
		switch r.Status { // granted once the command ran with them, not when refused or not started
		case engine.StatusOK, engine.StatusFailed, engine.StatusTimedOut, engine.StatusCancelled, engine.StatusStarted:
			if approved && len(in.Network) > 0 {
				s.grant(tc.ConversationID, in.Network)
			}
		}
		return r
	}

	// The second round of an approval asked through a multi-round-trip
	// input request (protocol 2026-07-28 and later).
	if req.Params.InputResponses != nil || req.Params.RequestState != "" {
		if r, ok := s.approvalRetry(req, tc, in, run); ok {
			return s.finish(c, in, r), nil
		}
		// Bad or stale state: run without approval and never ask again.
		return s.finish(c, in, run(false)), nil
	}

	r := run(false)
	if r.Status == engine.StatusNeedsApproval && s.canElicit(req) {
		return s.askApproval(c, in, r, run)
	}
	return s.finish(c, in, r), nil
}

// metaCallID is the _meta key of a bash call that carries its call id:
// the model's tool-use id ("toolu_…", "call_…"), for an agent server that
// may send a call again after a failure of its own. The call's
// [engine.ToolContext.CallID] is then the conversation, "/", and this id,
// so that a Runner that keeps call ids (a fleet's cluster.Client) runs it
// at most once in that conversation. Without it the call has no call id:
// the go-sdk does not give handlers the JSON-RPC request id, and a
// client's retry would carry a new one anyway.
const metaCallID = "bashvisor/call_id"

// callID is the call id of a call in conversation conv with _meta m.
func callID(conv string, m mcp.Meta) string {
	id, _ := m[metaCallID].(string)
	if id == "" {
		return ""
	}
	return conv + "/" + clip(id, 256)
}

// finish turns a Result into the tool result: the model's text as content,
// followed by a resource link to the full output when it was truncated or
// to the job's output when it started one; the Result as structured
// content when the call asked for it; isError unless ok or started.
func (s *server) finish(c *toolCall, in engine.Input, r engine.Result) *mcp.CallToolResult {
	s.log.Debug("bash call", "conversation", c.tc.ConversationID, "principal", c.tc.Principal, "display", logCommand{s.e, r.Display},
		"status", r.Status, "duration_ms", r.DurationMS, "bytes", r.OutputBytes)
	if s.o.OnResult != nil {
		s.o.OnResult(c.tc.ConversationID, in, r)
	}
	var links []mcp.Content
	switch {
	case r.JobID != "":
		links = append(links, jobLink(c.sc, engine.JobInfo{JobID: r.JobID, Display: r.Display, Bytes: r.OutputBytes}))
	case r.Truncated && r.FullOutputFile != "":
		id := s.outputs.add(c.sc.conv, r.FullOutputFile, r.OutputBytes)
		links = append(links, outputLink(c.sc, id, r))
	}
	res := s.reply(c, r.Output, r, links...)
	res.IsError = r.Status != engine.StatusOK && r.Status != engine.StatusStarted
	return res
}

// badInput is the result for malformed arguments: status "error", text
// "[error: bad input: …]", nothing run. err wraps engine.ErrBadInput.
func badInput(in engine.Input, err error) engine.Result {
	return engine.Result{
		Status:  engine.StatusError,
		Output:  engine.ErrorText(err),
		Command: in.Command,
		Display: in.Command,
		Err:     err,
	}
}

// errorResult is a tool-level error for the job tools.
func errorResult(err error) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: engine.ErrorText(err)}},
		IsError: true,
	}
}

// logCommand is a command as a debug log value, redacted only when a
// handler actually logs it (a disabled debug log costs nothing).
type logCommand struct {
	r       engine.Runner
	command string
}

func (l logCommand) LogValue() slog.Value { return slog.StringValue(l.r.RedactCommand(l.command)) }
