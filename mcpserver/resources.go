package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/truncate"
)

// Full outputs as MCP resources.
//
// A truncated bash result and every background job's output carry a
// resource link; resources/read serves it, scoped like the tools: the URI
// names a conversation of the requesting principal, and a session's
// conversation only to that session.

// The resource templates of [New]: a background job's output, and the
// full output of a truncated result of a conversation (id: the output's,
// from its spool file's name: it reaches the output from any front of a
// fleet). offset and length (in that order, both optional) read a byte
// range.
const (
	jobOutputTemplate  = "bashvisor://conversation/{conversation}/jobs/{job_id}{?offset,length}"
	fullOutputTemplate = "bashvisor://conversation/{conversation}/outputs/{id}{?offset,length}"
)

// maxResourceRead is the most one resources/read returns: a longer
// resource is served from offset for maxResourceRead bytes, and the
// content's _meta gives its size and the URI of the rest
// (metaResourceSize, metaResourceNext).
const maxResourceRead = 4 << 20

// The _meta keys of resource contents: the offset of the first byte
// served, the resource's size in bytes at the time of the read, and, when
// more follows, the URI that reads on.
const (
	metaResourceOffset = "bashvisor/offset"
	metaResourceSize   = "bashvisor/size"
	metaResourceNext   = "bashvisor/next"
)

// outputsKept is how many full outputs a conversation keeps reachable as
// resources (the engine itself keeps Config.SpoolKeep files in all).
const outputsKept = 16

// fullOutputs remembers the full-output files of truncated results, by
// conversation, so that a resource URI names an id, never a path.
type fullOutputs struct {
	mu    sync.Mutex
	convs map[string]*convOutputs
}

type convOutputs struct {
	files []fullOutput // oldest first, at most outputsKept
}

type fullOutput struct {
	id   string
	path string
	size int64
}

// add records the full output of a result of conv and returns its id.
func (o *fullOutputs) add(conv, path string, size int64) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.convs == nil {
		o.convs = map[string]*convOutputs{}
	}
	c := o.convs[conv]
	if c == nil {
		c = &convOutputs{}
		o.convs[conv] = c
	}
	id := truncate.SpoolID(path)
	c.files = append(c.files, fullOutput{id: id, path: path, size: size})
	if len(c.files) > outputsKept {
		c.files = c.files[1:]
	}
	return id
}

func (o *fullOutputs) get(conv string, id string) (fullOutput, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if c := o.convs[conv]; c != nil {
		for _, f := range c.files {
			if f.id == id {
				return f, true
			}
		}
	}
	return fullOutput{}, false
}

func (o *fullOutputs) list(conv string) []fullOutput {
	o.mu.Lock()
	defer o.mu.Unlock()
	if c := o.convs[conv]; c != nil {
		return append([]fullOutput(nil), c.files...)
	}
	return nil
}

func (o *fullOutputs) forget(conv string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.convs, conv)
}

// resourceURI returns the URI of a resource of conversation name.
func resourceURI(name, kind, id string) string {
	return "bashvisor://conversation/" + url.PathEscape(name) + "/" + kind + "/" + url.PathEscape(id)
}

// jobLink is the resource link of a background job's output.
func jobLink(sc scope, j engine.JobInfo) *mcp.ResourceLink {
	size := j.Bytes
	return &mcp.ResourceLink{
		URI:         resourceURI(sc.name, "jobs", j.JobID),
		Name:        j.JobID,
		Title:       "Output of " + j.JobID,
		Description: "The whole output of background job " + j.JobID + " (" + clip(j.Display, 200) + ") so far",
		MIMEType:    "text/plain",
		Size:        &size,
	}
}

// outputLink is the resource link of full output id of sc's conversation.
func outputLink(sc scope, id string, r engine.Result) *mcp.ResourceLink {
	size := r.OutputBytes
	return &mcp.ResourceLink{
		URI:         resourceURI(sc.name, "outputs", id),
		Name:        "output-" + id,
		Title:       "Full output",
		Description: "The whole output of `" + clip(r.Display, 200) + "`, which the result shows truncated",
		MIMEType:    "text/plain",
		Size:        &size,
	}
}

// addResources registers the resource templates and the resources/list
// of the request's conversation.
func (s *server) addResources(ms *mcp.Server) {
	ms.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: jobOutputTemplate,
		Name:        "job-output",
		Title:       "Background job output",
		Description: "The output of a background job of this conversation (bash_jobs lists them). " +
			"offset and length read a byte range; one read returns at most 4 MiB.",
		MIMEType: "text/plain",
	}, s.readResource)
	ms.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: fullOutputTemplate,
		Name:        "full-output",
		Title:       "Full output of a truncated result",
		Description: "The whole output of a bash result that was truncated (its resource link names it). " +
			"offset and length read a byte range; one read returns at most 4 MiB.",
		MIMEType: "text/plain",
	}, s.readResource)
	ms.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "resources/list":
				return s.listResources(ctx, req)
			case "prompts/list", "prompts/get":
				// The go-sdk answers these without the prompts
				// capability; a server without prompts must not.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method + " (this server has no prompts)"}
			}
			return next(ctx, method, req)
		}
	})
}

// privateCache marks results that depend on the principal and the
// conversation (resources/list and resources/read): a client may cache
// them for its user only, and they are stale at once.
var privateCache = mcp.Cacheable{CacheScope: "private"}

// setCacheable is ServerOptions.SetCacheable.
func setCacheable(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
	switch req.(type) {
	case *mcp.ReadResourceRequest, *mcp.ListResourcesRequest:
		*c = privateCache
	}
}

// listResources lists the outputs of the request's conversation: its
// background jobs' and its kept full outputs.
func (s *server) listResources(ctx context.Context, req mcp.Request) (*mcp.ListResourcesResult, error) {
	sc, err := s.scopeOf(ctx, req)
	if err != nil {
		return nil, err
	}
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	res.Cacheable = privateCache
	for _, j := range s.e.Jobs(s.toolContext(sc)) {
		l := jobLink(sc, j)
		res.Resources = append(res.Resources, &mcp.Resource{URI: l.URI, Name: l.Name, Title: l.Title, Description: l.Description, MIMEType: l.MIMEType, Size: *l.Size})
	}
	for _, f := range s.outputs.list(sc.conv) {
		res.Resources = append(res.Resources, &mcp.Resource{
			URI: resourceURI(sc.name, "outputs", f.id), Name: "output-" + f.id,
			Title: "Full output", MIMEType: "text/plain", Size: f.size,
		})
	}
	return res, nil
}

// parsedURI is a resource URI of ours.
type parsedURI struct {
	conv, kind, id string
	offset, length int64
}

func parseResourceURI(raw string) (parsedURI, error) {
	var p parsedURI
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "bashvisor" || u.Host != "conversation" {
		return p, errors.New("not a bashvisor output URI")
	}
	parts := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	if len(parts) != 3 {
		return p, errors.New("not a bashvisor output URI")
	}
	for i, part := range parts {
		if parts[i], err = url.PathUnescape(part); err != nil {
			return p, err
		}
	}
	p.conv, p.kind, p.id = parts[0], parts[1], parts[2]
	q := u.Query()
	for name, dst := range map[string]*int64{"offset": &p.offset, "length": &p.length} {
		if v := q.Get(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return p, fmt.Errorf("%s must be a non-negative integer", name)
			}
			*dst = n
		}
	}
	if p.length == 0 || p.length > maxResourceRead {
		p.length = maxResourceRead
	}
	return p, nil
}

// resourceScope maps the conversation a URI names to the request's
// principal: a session's conversation only for that session, a named one
// (or the principal's own) for any request of the principal.
func (s *server) resourceScope(ctx context.Context, req *mcp.ReadResourceRequest, name string) (scope, bool, error) {
	sc, err := s.scopeOf(ctx, req)
	if err != nil {
		return sc, false, err
	}
	if strings.HasPrefix(name, sessionMark) {
		return sc, sc.session != nil && sc.name == name, nil
	}
	if name != s.o.ConversationID && !validConversationName(name) {
		return sc, false, nil
	}
	_, overHTTP := principalFrom(ctx)
	sc.name, sc.conv, sc.session, sc.named = name, s.conversationID(sc.principal, overHTTP, name), nil, false
	return sc, true, nil
}

// readResource serves resources/read of both templates.
func (s *server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	p, err := parseResourceURI(uri)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	sc, ok, err := s.resourceScope(ctx, req, p.conv)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	var data string
	var size, end int64
	switch p.kind {
	case "jobs":
		data, size, end, err = s.readJob(s.toolContext(sc), &p)
	case "outputs":
		data, end, size, err = s.readFullOutput(sc, p)
	default:
		err = mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, err
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: "text/plain", Text: data,
		Meta: mcp.Meta{metaResourceOffset: min(p.offset, size), metaResourceSize: size}}
	if end < size && end > min(p.offset, size) {
		c.Meta[metaResourceNext] = resourceURI(p.conv, p.kind, p.id) + "?offset=" + strconv.FormatInt(end, 10)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
}

// readJob reads a range of a background job's output through the Runner,
// in the engine's 128 KiB slices, rendered as the model reads them (see
// engine.JobOutput; a terminal job's range is one read of its terminal's
// text). It returns the text, the file's size and the file offset after
// the bytes the text covers.
//
// A job's capped output file drops the oldest output past its cap
// (config.Output.JobFileCap): a read that starts in the dropped range
// starts after it (p.offset is moved there), and one that reaches it
// stops there (the next read skips it).
func (s *server) readJob(tc engine.ToolContext, p *parsedURI) (string, int64, int64, error) {
	var b strings.Builder
	off, size := p.offset, int64(0)
	for int64(b.Len()) < p.length {
		jo, err := s.e.JobOutput(tc, p.id, 0, off, min(p.length-int64(b.Len()), maxReadBytes))
		if err != nil {
			if errors.Is(err, engine.ErrNoSuchJob) {
				return "", 0, 0, mcp.ResourceNotFoundError(resourceURI(p.conv, p.kind, p.id))
			}
			return "", 0, 0, err
		}
		size = jo.Size
		if jo.Offset > off && !jo.Job.TTY {
			if b.Len() > 0 {
				break // dropped output: the next read says so
			}
			p.offset = jo.Offset
		}
		b.WriteString(jo.Data)
		if jo.End <= off || jo.EOF || jo.Job.TTY {
			off = max(off, jo.End)
			break
		}
		off = jo.End
	}
	return b.String(), size, off, nil
}

func (s *server) readFullOutput(sc scope, p parsedURI) (data string, end, size int64, err error) {
	notFound := mcp.ResourceNotFoundError(resourceURI(p.conv, p.kind, p.id))
	if r, ok := s.e.(fullOutputReader); ok {
		data, end, size, err = r.ReadFullOutput(s.toolContext(sc), p.id, p.offset, p.length)
		if errors.Is(err, fs.ErrNotExist) {
			return "", 0, 0, notFound
		}
		return data, end, size, err
	}
	fo, ok := s.outputs.get(sc.conv, p.id)
	if !ok {
		return "", 0, 0, notFound
	}
	data, end, size, err = truncate.ReadSpool(fo.path, p.offset, p.length)
	if errors.Is(err, fs.ErrNotExist) {
		return "", 0, 0, fmt.Errorf("the full output %s is no longer kept (the engine keeps the newest few): %w", p.id, err)
	}
	return data, end, size, err
}

// fullOutputReader is a Runner whose full outputs are on other machines
// (a fleet's cluster.Client): it reads them there, by id, for any front
// of the fleet. An output the conversation does not have is an error
// matching fs.ErrNotExist.
type fullOutputReader interface {
	ReadFullOutput(tc engine.ToolContext, id string, offset, length int64) (data string, end, size int64, err error)
}
