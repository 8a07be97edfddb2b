package mcpserver_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

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

// Over stdio, as `demo mcp` does: the client starts the program and talks
// on its stdin and stdout. StdioTransport answers malformed lines with a
// JSON-RPC error instead of ending the session.
func ExampleNew() {
	e, err := engine.New(engine.DefaultConfig())
	if err != nil {
		panic(err)
	}
	defer e.Shutdown(context.Background())
	srv := mcpserver.New(e, mcpserver.Options{})
	if err := srv.Run(context.Background(), &mcpserver.StdioTransport{Reader: os.Stdin, Writer: os.Stdout}); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}
