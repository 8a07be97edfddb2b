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
	"strings"
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
}

// runFunc is [engine.Runner.Run]; tests substitute it to reach statuses the
// engine's configuration cannot produce.
type runFunc func(context.Context, engine.ToolContext, engine.Input) engine.Result

// New returns an MCP server exposing r (an *engine.Engine, or any
// engine.Runner) as the tools bash, bash_jobs, bash_output, bash_write
// and bash_kill, and bash_undo when r is an [engine.Undoer]. Serve it with [mcp.Server.Run] over
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
	ms.AddTool(&mcp.Tool{
		Name:         toolBash,
		Title:        "Bash",
		Description:  e.Description(tc),
		InputSchema:  bashInputSchema(),
		OutputSchema: json.RawMessage(resultOutputSchema),
		Annotations:  &mcp.ToolAnnotations{Title: "Bash", DestructiveHint: &yes, OpenWorldHint: &yes},
	}, s.safe(s.bash))
	ms.AddTool(&mcp.Tool{
		Name:         toolJobs,
		Title:        "List background jobs",
		Description:  "List this conversation's background jobs (started with mode \"background\"), running and ended: job_id, pid, status, start time, bytes of output, command.",
		InputSchema:  json.RawMessage(jobsInputSchema),
		OutputSchema: json.RawMessage(jobsOutputSchema),
		Annotations:  &mcp.ToolAnnotations{Title: "List background jobs", ReadOnlyHint: true, IdempotentHint: true},
	}, s.safe(s.jobs))
	ms.AddTool(&mcp.Tool{
		Name:  toolOutput,
		Title: "Read a background job's output",
		Description: "Read a background job's output and status. By default returns the last 32 KiB; " +
			"tail_bytes sets how much of the end to return, or offset and limit read a byte range " +
			"(at most 128 KiB per call) to page through it. wait_ms (at most 30000) first waits for " +
			"output past offset (or past the current end) or for the job to end.",
		InputSchema:  json.RawMessage(outputInputSchema),
		OutputSchema: json.RawMessage(outputOutputSchema),
		Annotations:  &mcp.ToolAnnotations{Title: "Read a background job's output", ReadOnlyHint: true},
	}, s.safe(s.output))
	ms.AddTool(&mcp.Tool{
		Name:  toolKill,
		Title: "Stop a background job",
		Description: "Stop a background job and every process it started: SIGTERM to its process group, " +
			"SIGKILL after the grace period. Returns the job's final status.",
		InputSchema:  json.RawMessage(killInputSchema),
		OutputSchema: json.RawMessage(jobInfoSchema),
		Annotations:  &mcp.ToolAnnotations{Title: "Stop a background job", DestructiveHint: &yes, IdempotentHint: true},
	}, s.safe(s.kill))
	ms.AddTool(&mcp.Tool{
		Name:  toolWrite,
		Title: "Send input to a background job",
		Description: "Send input to a background job started with stdin \"pipe\" or tty true (on a terminal " +
			"the input is keys: \"\\u0003\" is Ctrl-C, \"\\u0004\" Ctrl-D), optionally close its stdin, then wait " +
			"up to yield_ms (default 250, at most 30000) for its output to settle and return the new output and the job's status.",
		InputSchema:  json.RawMessage(writeInputSchema),
		OutputSchema: json.RawMessage(outputOutputSchema),
		Annotations:  &mcp.ToolAnnotations{Title: "Send input to a background job", DestructiveHint: &yes, OpenWorldHint: &yes},
	}, s.safe(s.write))
	if u, ok := e.(engine.Undoer); ok {
		s.addUndo(ms, u)
	}
	s.addResources(ms)
	return s, ms
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

// enter resolves a call's scope and records it in its conversation; leave
// records the call's end. A call that cannot be scoped gets an error
// result.
func (s *server) enter(ctx context.Context, req mcp.Request) (sc scope, leave func(), res *mcp.CallToolResult) {
	sc, err := s.scopeOf(ctx, req)
	if err == nil {
		leave, err = s.convs.enter(sc)
	}
	if err != nil {
		return sc, nil, errorResult(err)
	}
	return sc, leave, nil
}

func (s *server) bash(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, done := s.callContext(ctx)
	defer done()
	sc, leave, bad := s.enter(ctx, req)
	if bad != nil {
		return bad, nil
	}
	defer leave()
	tc := s.toolContext(sc)
	tc.CallID = callID(tc.ConversationID, req.Params.Meta)
	in, err := parseBashInput(req.Params.Arguments)
	if err != nil {
		return s.finish(sc, tc, in, badInput(in, err)), nil
	}
	run := func(approved bool) engine.Result {
		tc := tc
		tc.Approved = approved
		if tok := req.Params.GetProgressToken(); tok != nil {
			p := startProgress(ctx, req.Session, tok, s.o.ProgressInterval, s.log)
			defer p.stop()
			tc.Progress = p.update
		}
		return s.run(ctx, tc, in)
	}

	// The second round of an approval asked through a multi-round-trip
	// input request (protocol 2026-07-28 and later).
	if req.Params.InputResponses != nil || req.Params.RequestState != "" {
		if r, ok := s.approvalRetry(req, tc, in, run); ok {
			return s.finish(sc, tc, in, r), nil
		}
		// Bad or stale state: run without approval and never ask again.
		return s.finish(sc, tc, in, run(false)), nil
	}

	r := run(false)
	if r.Status == engine.StatusNeedsApproval && s.canElicit(req) {
		return s.askApproval(ctx, req, sc, tc, in, r, run)
	}
	return s.finish(sc, tc, in, r), nil
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
// content; isError unless ok or started.
func (s *server) finish(sc scope, tc engine.ToolContext, in engine.Input, r engine.Result) *mcp.CallToolResult {
	s.log.Debug("bash call", "conversation", tc.ConversationID, "principal", tc.Principal, "display", logCommand{s.e, r.Display},
		"status", r.Status, "duration_ms", r.DurationMS, "bytes", r.OutputBytes)
	if s.o.OnResult != nil {
		s.o.OnResult(tc.ConversationID, in, r)
	}
	content := []mcp.Content{&mcp.TextContent{Text: r.Output}}
	switch {
	case r.JobID != "":
		content = append(content, jobLink(sc, engine.JobInfo{JobID: r.JobID, Display: r.Display, Bytes: r.OutputBytes}))
	case r.Truncated && r.FullOutputFile != "":
		id := s.outputs.add(sc.conv, r.FullOutputFile, r.OutputBytes)
		content = append(content, outputLink(sc, id, r))
	}
	return &mcp.CallToolResult{
		Content:           content,
		StructuredContent: r,
		IsError:           r.IsError(),
	}
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

// structured is a job tool's result: text for the model, v as structured
// content.
func structured(text string, v any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: v}
}

// job returns a job of the call's conversation.
func (s *server) job(tc engine.ToolContext, id string) (engine.JobInfo, error) {
	j, err := s.e.Job(tc, id)
	if err != nil {
		return j, engine.JobError(id, err)
	}
	return j, nil
}

// jobsResult is bash_jobs's structured content.
type jobsResult struct {
	Jobs []engine.JobInfo `json:"jobs"`
}

func (s *server) jobs(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := parseNoArgs(req.Params.Arguments); err != nil {
		return errorResult(fmt.Errorf("%w: %w", engine.ErrBadInput, err)), nil
	}
	sc, leave, bad := s.enter(ctx, req)
	if bad != nil {
		return bad, nil
	}
	defer leave()
	out := jobsResult{Jobs: s.e.Jobs(s.toolContext(sc))}
	if out.Jobs == nil {
		out.Jobs = []engine.JobInfo{}
	}
	return structured(engine.JobsText(out.Jobs, time.Now()), out), nil
}

func (s *server) output(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	a, err := parseOutputArgs(req.Params.Arguments)
	if err != nil {
		return errorResult(fmt.Errorf("%w: %w", engine.ErrBadInput, err)), nil
	}
	sc, leave, bad := s.enter(ctx, req)
	if bad != nil {
		return bad, nil
	}
	defer leave()
	tc := s.toolContext(sc)
	j, err := s.job(tc, a.jobID)
	if err != nil {
		return errorResult(err), nil
	}
	if a.wait > 0 {
		ctx, done := s.callContext(ctx)
		defer done()
		from := j.Bytes
		if a.ranged {
			from = a.offset
		}
		if _, err := s.e.WaitOutput(ctx, tc, a.jobID, from, a.wait); err != nil {
			return errorResult(engine.JobError(a.jobID, err)), nil
		}
	}
	jo, err := s.e.JobOutput(tc, a.jobID, a.tail, a.offset, a.limit)
	if err != nil {
		return errorResult(engine.JobError(a.jobID, err)), nil
	}
	return jobOutputResult(sc, jo), nil
}

// jobOutputResult is bash_output's and bash_write's result: the slice's
// text and a resource link to the job's whole output.
func jobOutputResult(sc scope, jo engine.JobOutput) *mcp.CallToolResult {
	res := structured(jo.Text(), jo)
	res.Content = append(res.Content, jobLink(sc, jo.Job))
	return res
}

func (s *server) kill(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, done := s.callContext(ctx)
	defer done()
	id, err := parseJobID(req.Params.Arguments)
	if err != nil {
		return errorResult(fmt.Errorf("%w: %w", engine.ErrBadInput, err)), nil
	}
	sc, leave, bad := s.enter(ctx, req)
	if bad != nil {
		return bad, nil
	}
	defer leave()
	tc := s.toolContext(sc)
	if _, err := s.job(tc, id); err != nil {
		return errorResult(err), nil
	}
	j, err := s.e.Kill(ctx, tc, id)
	if err != nil {
		return errorResult(engine.JobError(id, err)), nil
	}
	return structured(j.Text(), j), nil
}

// settle is how long bash_write waits, once new output arrived, for the
// job to go quiet before it answers (an echoed line and the answer to it
// usually come apart).
const settle = 100 * time.Millisecond

func (s *server) write(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx, done := s.callContext(ctx)
	defer done()
	a, err := parseWriteArgs(req.Params.Arguments)
	if err != nil {
		return errorResult(fmt.Errorf("%w: %w", engine.ErrBadInput, err)), nil
	}
	sc, leave, bad := s.enter(ctx, req)
	if bad != nil {
		return bad, nil
	}
	defer leave()
	tc := s.toolContext(sc)
	j, err := s.job(tc, a.jobID)
	if err != nil {
		return errorResult(err), nil
	}
	from := j.Bytes
	if err := s.e.Write(ctx, tc, a.jobID, []byte(a.input), a.close); err != nil {
		return errorResult(err), nil
	}
	// Wait for the first new output that is more than a terminal's echo
	// of the input, then until the job is quiet for settle, it ends, or
	// the wait is over.
	deadline := time.Now().Add(a.wait)
	echo := ttyEcho(a.input)
	seen, answered := from, false
	for {
		wait := time.Until(deadline)
		if answered {
			wait = min(wait, settle)
		}
		j, err = s.e.WaitOutput(ctx, tc, a.jobID, seen, wait)
		if err != nil {
			return errorResult(engine.JobError(a.jobID, err)), nil
		}
		if j.Status != engine.JobRunning || j.Bytes <= seen || !time.Now().Before(deadline) || ctx.Err() != nil {
			break
		}
		seen = j.Bytes
		answered = answered || !s.onlyEcho(tc, a.jobID, from, seen, echo)
	}
	jo, err := s.e.JobOutput(tc, a.jobID, 0, from, maxReadBytes)
	if err != nil {
		return errorResult(engine.JobError(a.jobID, err)), nil
	}
	return jobOutputResult(sc, jo), nil
}

// ttyEcho is what a terminal echoes of input: each line end as "\r\n".
func ttyEcho(input string) string {
	return strings.NewReplacer("\r\n", "\r\n", "\r", "\r\n", "\n", "\r\n").Replace(input)
}

// onlyEcho reports whether the output of job id between offsets from and
// to is (a start of) echo: a terminal echoing the input, not yet the
// program's answer. The output reads rendered (a line end as "\n") unless
// the engine gives it raw.
func (s *server) onlyEcho(tc engine.ToolContext, id string, from, to int64, echo string) bool {
	if echo == "" || to-from > int64(len(echo)) {
		return false
	}
	jo, err := s.e.JobOutput(tc, id, 0, from, to-from)
	return err == nil && (strings.HasPrefix(echo, jo.Data) || strings.HasPrefix(strings.ReplaceAll(echo, "\r\n", "\n"), jo.Data))
}

// logCommand is a command as a debug log value, redacted only when a
// handler actually logs it (a disabled debug log costs nothing).
type logCommand struct {
	r       engine.Runner
	command string
}

func (l logCommand) LogValue() slog.Value { return slog.StringValue(l.r.RedactCommand(l.command)) }
