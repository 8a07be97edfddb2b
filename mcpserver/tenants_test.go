package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/mcpserver/bearer"
	"github.com/bashvisor/bashvisor/mcpserver/internal/authtest"
)

// Tokens of the two principals of the tenant tests.
const (
	aliceToken = "alice-0123456789abcdef"
	bobToken   = "bob-0123456789abcdefgh"
)

// tenantServer serves one engine to alice and bob, from a token file.
func tenantServer(t *testing.T, mod func(*engine.Config), opts Options) *sessServer {
	t.Helper()
	return tenantServerHTTP(t, mod, opts, HTTPOptions{})
}

// tenantServerHTTP is tenantServer with HTTP options.
func tenantServerHTTP(t *testing.T, mod func(*engine.Config), opts Options, hopts HTTPOptions) *sessServer {
	t.Helper()
	tf, err := bearer.OpenTokenFile(authtest.WriteTokens(t, "# principals\nalice "+aliceToken+"\nbob "+bobToken+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	hopts.Verifier = tf.Verify
	opts.Structured = true // the tests read the results' fields
	return newSessServer(t, mod, opts, hopts)
}

// headers adds fixed headers to every request.
type headers struct {
	h    map[string]string
	next http.RoundTripper
}

func (t headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	return t.next.RoundTrip(r)
}

// connectAs connects a go-sdk client with token at protocol proto
// ("2025-11-25": a session; "2026-07-28": stateless), naming conversation
// conv in the header when set.
func (h *httpSetup) connectAs(t *testing.T, token, proto, conv string) *mcp.ClientSession {
	t.Helper()
	hdr := map[string]string{"Authorization": "Bearer " + token}
	if conv != "" {
		hdr[conversationHeader] = conv
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: &http.Client{Transport: headers{hdr, h.tr}}},
		&mcp.ClientSessionOptions{ProtocolVersion: proto})
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != proto {
		t.Fatalf("negotiated %s, want %s", got, proto)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// links returns the resource links of a tool result.
func links(res *mcp.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			out = append(out, l.URI)
		}
	}
	return out
}

// readResource reads a resource; it returns the text, or the error.
func readResource(ctx context.Context, cs *mcp.ClientSession, uri string) (string, mcp.Meta, error) {
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return "", nil, err
	}
	if len(res.Contents) != 1 {
		return "", nil, fmt.Errorf("%d contents", len(res.Contents))
	}
	return res.Contents[0].Text, res.Contents[0].Meta, nil
}

// Two principals on one server, in both HTTP modes, with the same
// conversation names: every tool and resource of one is out of the
// other's reach, whatever ids, names, URIs or session ids the other
// guesses; each reaches its own.
func TestPrincipalsAreIsolated(t *testing.T) {
	s := tenantServer(t, func(c *engine.Config) { c.Output.Max = 2000 }, Options{})
	ctx := context.Background()
	for _, tc := range []struct{ name, proto, conv string }{
		{"sessions", "2025-11-25", ""},
		{"stateless-default", "2026-07-28", ""},
		{"stateless-named", "2026-07-28", "build"},
		{"sessions-named", "2025-11-25", "test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alice := s.connectAs(t, aliceToken, tc.proto, tc.conv)
			bob := s.connectAs(t, bobToken, tc.proto, tc.conv)

			// alice: a background job with input, and a truncated result.
			start, _ := call(t, ctx, alice, toolBash, map[string]any{"command": "echo alice-secret; cat", "mode": "background", "stdin": "pipe"}, nil)
			var started engine.Result
			decode(t, start, &started)
			if started.Status != engine.StatusStarted {
				t.Fatalf("alice's job: %+v", started)
			}
			jobURI := links(start)[0]
			big, _ := call(t, ctx, alice, toolBash, map[string]any{"command": "seq 1 3000; echo alice-tail"}, nil)
			var bigR engine.Result
			decode(t, big, &bigR)
			if !bigR.Truncated || len(links(big)) != 1 {
				t.Fatalf("alice's big result: truncated %v, links %v", bigR.Truncated, links(big))
			}
			fullURI := links(big)[0]
			if text, _, err := readResource(ctx, alice, fullURI); err != nil || !strings.HasSuffix(text, "2999\n3000\nalice-tail\n") {
				t.Fatalf("alice reads her full output: %v %q", err, clip(text, 100))
			}
			readUntil(t, alice, started.JobID, "alice-secret")

			// bob, in the conversation of the same name, sees nothing of it.
			var jobs jobsResult
			call(t, ctx, bob, toolJobs, nil, &jobs)
			if len(jobs.Jobs) != 0 {
				t.Errorf("bob lists %+v", jobs.Jobs)
			}
			for _, tool := range []string{toolOutput, toolKill, toolWrite} {
				args := map[string]any{"job_id": started.JobID}
				if tool == toolWrite {
					args["input"] = "FORGED\n"
				}
				res, text := call(t, ctx, bob, tool, args, nil)
				if !res.IsError || !strings.Contains(text, "no such job") || strings.Contains(text, "alice") {
					t.Errorf("bob %s on alice's job: %q", tool, text)
				}
			}
			for _, uri := range []string{jobURI, fullURI, jobURI + "?offset=0&length=10"} {
				if text, _, err := readResource(ctx, bob, uri); err == nil || strings.Contains(text, "alice") {
					t.Errorf("bob read %s: %q %v", uri, text, err)
				}
			}
			lr, err := bob.ListResources(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range lr.Resources {
				if r.URI == jobURI || r.URI == fullURI {
					t.Errorf("bob lists alice's %s", r.URI)
				}
			}
			// bob's own job in the "same" conversation is his, numbered
			// from 1 like alice's; without sessions even its URI is the
			// same, and serves bob's.
			mine, _ := call(t, ctx, bob, toolBash, map[string]any{"command": "echo bob", "mode": "background"}, nil)
			var mineR engine.Result
			decode(t, mine, &mineR)
			if mineR.JobID != started.JobID {
				t.Errorf("bob's first job %s; alice's %s", mineR.JobID, started.JobID)
			}
			if sameURI := links(mine)[0] == jobURI; sameURI != (tc.conv != "" || tc.proto != "2025-11-25") {
				t.Errorf("bob's job %v, alice's %s", links(mine), jobURI)
			}
			readUntil(t, bob, mineR.JobID, "bob")
			if text, _, err := readResource(ctx, bob, links(mine)[0]); err != nil || strings.Contains(text, "alice") || !strings.HasPrefix(text, "bob") {
				t.Errorf("bob reads his own job: %q %v", text, err)
			}

			// alice's job is untouched: alive, unforged, and still hers.
			var w engine.JobOutput
			if res, text := call(t, ctx, alice, toolWrite, map[string]any{"job_id": started.JobID, "input": "hello\n", "close": true, "yield_ms": 2000}, &w); res.IsError || !strings.Contains(text, "hello") {
				t.Errorf("alice writes to her job: %q", text)
			}
			text, meta, err := readResource(ctx, alice, jobURI)
			if err != nil || text != "alice-secret\nhello\n" && !strings.HasPrefix(text, "alice-secret\nhello\n") || strings.Contains(text, "FORGED") {
				t.Errorf("alice reads her job: %q %v %v", text, meta, err)
			}
			call(t, ctx, alice, toolKill, map[string]any{"job_id": started.JobID}, nil)
			call(t, ctx, bob, toolKill, map[string]any{"job_id": mineR.JobID}, nil)
		})
	}

	// bob presenting alice's session id gets 404, as for a session that
	// does not exist; so does a DELETE of it.
	alice := s.connectAs(t, aliceToken, "2025-11-25", "")
	resp, body := s.post(t, ctx, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"bash_jobs","arguments":{}}}`,
		map[string]string{"Authorization": "Bearer " + bobToken, "Mcp-Session-Id": alice.ID(), "Mcp-Protocol-Version": "2025-11-25"})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob with alice's session id: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodDelete, s.url, nil)
	req.Header.Set("Mcp-Session-Id", alice.ID())
	req.Header.Set("Authorization", "Bearer "+bobToken)
	if resp, err := (&http.Client{Transport: s.tr}).Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob DELETEs alice's session: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if r := bash(t, ctx, alice, map[string]any{"command": "echo still here"}); r.Output != "still here\n" {
		t.Errorf("alice's session after bob's attempts: %+v", r)
	}

	// The principal reaches the engine, and the conversations are scoped
	// by it.
	convs := map[string]bool{}
	for _, j := range s.e.AllJobs() {
		convs[j.ConversationID] = true
	}
	for c := range convs {
		if !strings.HasPrefix(c, "alice/") && !strings.HasPrefix(c, "bob/") {
			t.Errorf("conversation %q is not scoped by a principal", c)
		}
	}
}

// A request can neither pose as another principal nor reach a session's
// conversation by name: the internal call header is replaced, and names
// are checked.
func TestConversationNames(t *testing.T) {
	s := tenantServer(t, nil, Options{})
	ctx := context.Background()
	for _, bad := range []string{"~0123456789abcdef", "alice/build", "../x", " build", strings.Repeat("x", 129)} {
		cs := s.connectAs(t, bobToken, "2026-07-28", "")
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolJobs, Arguments: map[string]any{}, Meta: mcp.Meta{metaConversation: bad}})
		if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "conversation name") {
			t.Errorf("name %q: %v %+v", bad, err, res)
		}
	}
	// Header and _meta must agree.
	cs := s.connectAs(t, bobToken, "2026-07-28", "one")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolJobs, Arguments: map[string]any{}, Meta: mcp.Meta{metaConversation: "two"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "name different conversations") {
		t.Errorf("header one, _meta two: %v %+v", err, res)
	}
	// _meta alone names it; the header alone too; the same name is the
	// same conversation.
	r := bash(t, ctx, cs, map[string]any{"command": "echo x", "mode": "background"})
	other := s.connectAs(t, bobToken, "2026-07-28", "")
	res, err = other.CallTool(ctx, &mcp.CallToolParams{Name: toolJobs, Arguments: map[string]any{}, Meta: mcp.Meta{metaConversation: "one"}})
	var jobs jobsResult
	if err != nil || decode(t, res, &jobs) == "" || len(jobs.Jobs) != 1 || jobs.Jobs[0].JobID != r.JobID {
		t.Errorf("the same name from another client: %v %+v", err, jobs)
	}
	// A forged call header changes nothing: the principal is still bob.
	resp, body := s.post(t, ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"bash_jobs","arguments":{}}}`,
		map[string]string{"Authorization": "Bearer " + bobToken, callHeader: "anything", "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "bash_jobs"})
	if resp.StatusCode != http.StatusOK || strings.Contains(body, "alice") {
		t.Errorf("forged call header: %d %s", resp.StatusCode, body)
	}
}

// A named conversation ends when idle: its jobs end; the principal's own
// conversation does not.
func TestNamedConversationIdle(t *testing.T) {
	s := tenantServer(t, nil, Options{ConversationIdle: 500 * time.Millisecond})
	named := s.connectAs(t, aliceToken, "2026-07-28", "scratch")
	own := s.connectAs(t, aliceToken, "2026-07-28", "")
	_, pidNamed := bgJob(t, named)
	_, pidOwn := bgJob(t, own)
	waitDead(t, 15*time.Second, pidNamed)
	time.Sleep(time.Second)
	if !alive(pidOwn) {
		t.Error("the principal's own conversation ended")
	}
	if got := jobIDs(t, named); len(got) != 0 {
		t.Errorf("the idle conversation still lists %v", got)
	}
}

// Over MaxConversations a call naming a new conversation is busy; the
// open ones go on.
func TestMaxConversations(t *testing.T) {
	s := tenantServer(t, nil, Options{MaxConversations: 2})
	ctx := context.Background()
	cs := s.connectAs(t, aliceToken, "2026-07-28", "")
	run := func(conv string) engine.Result {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: toolBash, Arguments: map[string]any{"command": "echo hi"}, Meta: mcp.Meta{metaConversation: conv, metaStructured: true}})
		if err != nil {
			t.Fatal(err)
		}
		var r engine.Result
		text := decode(t, res, &r)
		if r.Status == "" {
			r.Status, r.Output = engine.StatusError, text
		}
		return r
	}
	for _, conv := range []string{"c0", "c1", "c0"} {
		if r := run(conv); r.Status != engine.StatusOK {
			t.Errorf("%s: %+v", conv, r)
		}
	}
	if r := run("c2"); r.Status != engine.StatusError || !strings.Contains(r.Output, "busy: 2 named conversations are open") {
		t.Errorf("c2: %+v", r)
	}
	if r := run("c1"); r.Status != engine.StatusOK {
		t.Errorf("c1 again: %+v", r)
	}
}

// Full outputs are resources: a truncated result links its whole output,
// exact to the byte, readable in ranges with a link to the rest; a job's
// output likewise; resources/list lists the conversation's.
func TestOutputResources(t *testing.T) {
	s := tenantServer(t, func(c *engine.Config) { c.Output.Max = 1000 }, Options{})
	ctx := context.Background()
	cs := s.connectAs(t, aliceToken, "2026-07-28", "res")
	// 200,000 bytes of multi-byte text: "é" is 2 bytes, so odd ranges cut
	// characters.
	res, _ := call(t, ctx, cs, toolBash, map[string]any{"command": `python3 -c 'import sys; sys.stdout.write("é"*100000)'`}, nil)
	var r engine.Result
	decode(t, res, &r)
	if !r.Truncated || r.OutputBytes != 200000 || len(links(res)) != 1 {
		t.Fatalf("%+v %v", r, links(res))
	}
	uri := links(res)[0]
	text, meta, err := readResource(ctx, cs, uri)
	if err != nil || text != strings.Repeat("é", 100000) || meta[metaResourceSize] != float64(200000) || meta[metaResourceNext] != nil {
		t.Fatalf("whole: %d bytes %v %v", len(text), meta, err)
	}
	text, meta, err = readResource(ctx, cs, uri+"?offset=10&length=5")
	if err != nil || text != "éé" || meta[metaResourceOffset] != float64(10) || meta[metaResourceNext] != uri+"?offset=14" {
		t.Errorf("range: %q %v %v", text, meta, err)
	}
	// A job's output, read in slices as it grows.
	job, _ := call(t, ctx, cs, toolBash, map[string]any{"command": `seq 1 100000`, "mode": "background"}, nil)
	var jr engine.Result
	decode(t, job, &jr)
	waitDead(t, 10*time.Second, jr.PID)
	var want strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	text, meta, err = readResource(ctx, cs, links(job)[0])
	if err != nil || !strings.HasPrefix(text, want.String()) {
		t.Errorf("job output: %d bytes %v %v", len(text), meta, err)
	}
	if text, _, err := readResource(ctx, cs, links(job)[0]+"?offset=6&length=4"); err != nil || text != "4\n5\n" {
		t.Errorf("job range: %q %v", text, err)
	}
	lr, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, x := range lr.Resources {
		uris = append(uris, x.URI)
	}
	if len(uris) != 2 || uris[0] != links(job)[0] || uris[1] != uri {
		t.Errorf("resources/list: %v", uris)
	}
	lt, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(lt.ResourceTemplates) != 2 {
		t.Errorf("templates: %+v %v", lt, err)
	}
	for _, bad := range []string{"bashvisor://conversation/res/outputs/99", "bashvisor://conversation/res/jobs/job-9", "bashvisor://conversation/../outputs/1", "file:///etc/passwd"} {
		if _, _, err := readResource(ctx, cs, bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
