package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// StdioTransport in process: a line over MaxLineLength is answered and
// skipped, "\r\n" endings work, and EOF on the reader ends the session
// (goleak in TestMain checks that the filter's goroutine ends too).
func TestStdioTransportLines(t *testing.T) {
	e := newEngine(t, nil)
	srv := New(e, Options{WorkingDir: t.TempDir()})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ss, err := srv.Connect(context.Background(), &StdioTransport{Reader: inR, Writer: outW, MaxLineLength: 300}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(outR)
	answer := func(line string) map[string]any {
		t.Helper()
		done := make(chan struct{})
		go func() { io.WriteString(inW, line); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("the server does not read %.60q", line)
		}
		if !sc.Scan() {
			t.Fatalf("no answer to %.60q: %v", line, sc.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("answer %q: %v", sc.Text(), err)
		}
		return m
	}
	if m := answer(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}` + "\n"); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	long := `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"` + strings.Repeat("x", 400) + `"}}` + "\n"
	m := answer(long)
	if e, _ := m["error"].(map[string]any); e == nil || e["code"] != -32600.0 || e["message"] != "message longer than 300 bytes" || m["id"] != nil {
		t.Errorf("answer to a 400-byte line: %v", m)
	}
	if m := answer(`{"jsonrpc":"2.0","id":3,"method":"ping"}` + "\r\n"); m["id"] != 3.0 || m["error"] != nil {
		t.Errorf("ping with CRLF: %v", m)
	}
	if m := answer("not json\r\n"); m["error"] == nil {
		t.Errorf("answer to a non-JSON line: %v", m)
	}
	inW.Close()
	waited := make(chan error, 1)
	go func() { waited <- ss.Wait() }()
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end at EOF")
	}
	outR.Close()
}
