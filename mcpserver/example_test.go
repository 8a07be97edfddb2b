package mcpserver_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/mcpserver"
)

// An agent server mounts the bash tool on its own mux, next to its other
// routes, and any MCP client can then use it.
func ExampleHandler() {
	e, err := engine.New(engine.DefaultConfig())
	if err != nil {
		panic(err)
	}
	defer e.Shutdown(context.Background())

	dir, _ := os.MkdirTemp("", "workspace-")
	defer os.RemoveAll(dir)
	srv := mcpserver.New(e, mcpserver.Options{WorkingDir: dir, ConversationID: "conv-42"})

	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpserver.Handler(srv, mcpserver.HTTPOptions{Token: "s3cret"}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	ts := httptest.NewServer(mux) // in production: http.ListenAndServe("127.0.0.1:8765", mux)
	defer ts.Close()

	// A client (here the go-sdk's own) calls the tool.
	ctx := context.Background()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := mcp.NewClient(&mcp.Implementation{Name: "example-client"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: withToken{"s3cret", tr}},
	}, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "bash",
		Arguments: map[string]any{"command": "echo hello from $(basename $PWD | cut -c1-9)"},
	})
	if err != nil {
		panic(err)
	}
	fmt.Print(res.Content[0].(*mcp.TextContent).Text)
	fmt.Println("isError:", res.IsError)
	// Output:
	// hello from workspace
	// isError: false
}

// withToken adds the bearer token to every request.
type withToken struct {
	token string
	next  http.RoundTripper
}

func (t withToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return t.next.RoundTrip(r)
}

// Over stdio, as `demo mcp` does, the client starts the program and talks
// on its stdin and stdout: srv.Run(ctx, &mcpserver.StdioTransport{Reader:
// os.Stdin, Writer: os.Stdout}), where StdioTransport answers malformed
// lines with a JSON-RPC error instead of ending the session. Here the
// client is in the same process, over an in-memory connection; either
// way the session is the principal Options.Principal, in the
// conversation Options.ConversationID.
func ExampleNew() {
	e, err := engine.New(engine.DefaultConfig())
	if err != nil {
		panic(err)
	}
	defer e.Shutdown(context.Background())
	dir, _ := os.MkdirTemp("", "workspace-")
	defer os.RemoveAll(dir)
	srv := mcpserver.New(e, mcpserver.Options{WorkingDir: dir})

	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		panic(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "example-client"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		panic(err)
	}
	// A program (not a model) asks for the result's fields as
	// structuredContent; a model reads the text content.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "bash",
		Arguments: map[string]any{"command": "echo started; echo done", "mode": "background"},
		Meta:      mcp.Meta{"bashvisor/structured": true},
	})
	if err != nil {
		panic(err)
	}
	job := res.StructuredContent.(map[string]any)
	fmt.Println("status:", job["status"], "job:", job["job_id"])
	// The result links the job's output as a resource.
	link := res.Content[1].(*mcp.ResourceLink)
	fmt.Println(link.URI)
	// Once the job ends, its output ends with a completion line.
	var text string
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(text, "completed") && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: link.URI})
		if err != nil {
			panic(err)
		}
		text = rr.Contents[0].Text
	}
	fmt.Printf("%q\n", strings.TrimSpace(text))
	cs.Close()
	ss.Wait()
	// Output:
	// status: started job: job-1
	// bashvisor://conversation/mcp/jobs/job-1
	// "started\ndone\n\n\n[background process completed]"
}
