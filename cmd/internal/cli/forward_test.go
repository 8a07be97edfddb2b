package cli

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/bashvisor/bashvisor/internal/sandbox"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

// TestMCPForwardFlag: -forward needs -http, the sandbox and a local
// engine.
func TestMCPForwardFlag(t *testing.T) {
	t.Setenv(tokenEnv, "")
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"-forward", "-sandbox", "read-only"}, "-forward needs -http"},
		{[]string{"-forward", "-http", ":0", "-no-auth"}, "-forward needs -sandbox"},
		{[]string{"-forward", "-http", ":0", "-no-auth", "-sandbox", "read-only", "-executors", "127.0.0.1:1"}, "-forward needs a local engine"},
	} {
		if _, err := parseMCPFlags(c.args); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: error %v, want %q", c.args, err, c.err)
		}
	}
	if f, err := parseMCPFlags([]string{"-forward", "-http", ":0", "-no-auth", "-sandbox", "workspace-write"}); err != nil || !f.forward {
		t.Errorf("-forward -http -sandbox: %+v %v", f, err)
	}
}

// withBearer adds an Authorization header to every request.
type withBearer struct {
	token string
	next  http.RoundTripper
}

func (b withBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// TestMCPForward: `mcp -http -sandbox read-only -forward` offers
// bash_forward, whose URL (a path of the same port) serves the server a
// background command runs on the conversation's localhost, with the
// token only.
func TestMCPForward(t *testing.T) {
	testenv.Needf(t, testenv.Namespaces, sandbox.Probe().Namespaces, "no private namespaces: %s", sandbox.Probe())
	testenv.NeedsTool(t, "python3", "curl")
	const token = "forward-token-0123456789"
	addr := startHTTPDemo(t, []string{tokenEnv + "="}, "-sandbox", "read-only", "-forward", "-token", token)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: &http.Client{Transport: withBearer{token, tr}}},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	text := func(tool string, args map[string]any) string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		s := res.Content[0].(*mcp.TextContent).Text
		if res.IsError {
			t.Fatalf("%s: %s", tool, s)
		}
		return s
	}
	text("bash", map[string]any{"mode": "background",
		"command": "mkdir -p /tmp/site && echo served-from-the-sandbox > /tmp/site/index.html && cd /tmp/site && exec python3 -m http.server 3000"})
	if out := text("bash", map[string]any{"command": "for i in $(seq 200); do curl -sf -o /dev/null localhost:3000/ && exit 0; sleep 0.1; done; exit 7"}); out != "[listening: 3000 (job-1)]" {
		t.Fatalf("the conversation's next command: %q", out)
	}
	u, _, _ := strings.Cut(text("bash_forward", map[string]any{"port": 3000}), "\n")
	if !strings.HasPrefix(u, "http://"+addr+"/forward/") {
		t.Fatalf("bash_forward's URL %q is not a path of http://%s", u, addr)
	}
	for tok, want := range map[string]string{token: "200 served-from-the-sandbox\n", "": "401 "} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u+"index.html", nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := resp.Status[:4] + string(b); !strings.HasPrefix(got, want) {
			t.Errorf("GET %s with token %q: %q, want %q", u, tok, got, want)
		}
	}
}
