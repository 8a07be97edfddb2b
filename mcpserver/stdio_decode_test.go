package mcpserver

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestDecodeMessageAsTheGoSDK checks StdioTransport's decoder against the
// go-sdk's (jsonrpc.DecodeMessage) on edge cases and on random messages
// built from the pieces where they could differ: both fail, or both give
// the same kind of message with the same id, method and params.
func TestDecodeMessageAsTheGoSDK(t *testing.T) {
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bash","arguments":{"command":"true"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"a-1","method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}`,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
		`{"id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"Method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","METHOD":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"a"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":-0,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1e3,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":123456789012345678,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":true,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":{},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":""}`,
		`{"jsonrpc":"2.0","id":1,"method":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"p\u0069ng"}`,
		`{"jsonrpc":"2.0","id":"\u00e9","method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":[1, 2]}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{ "a" : [ 1 ] }}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","extra":1}`,
		`{"jsonrpc" : "2.0" , "id" : 7 , "method" : "ping"}`,
		`{"\u006aSONrpc":"2.0","id":1,"method":"ping"}`,
		`{}`,
		// Nested deeper than the go-sdk's 1,000 with the message's own
		// object (it refuses them), and exactly that deep; a bracket inside
		// a string does not count.
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 999) + strings.Repeat("]", 999) + `}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"` + strings.Repeat("[", 1001) + `\"["}}`,
	}
	pieces := []string{`"jsonrpc":"2.0"`, `"jsonrpc":"2.1"`, `"id":1`, `"id":"x"`, `"id":-42`, `"id":2.0`, `"id":null`,
		`"method":"tools/list"`, `"method":"a\"b"`, `"method":7`, `"params":{}`, `"params":[]`, `"params":{"k":"v"}`,
		`"params":1`, `"result":{}`, `"error":{"code":1,"message":"m"}`, `"Id":3`, `"x":{}`}
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		// Mostly a valid request's two keys, and some of the others, in
		// any order.
		var ps []string
		if r.IntN(5) > 0 {
			ps = append(ps, pieces[0], pieces[7])
		}
		for range r.IntN(4) {
			ps = append(ps, pieces[r.IntN(len(pieces))])
		}
		r.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
		var b bytes.Buffer
		b.WriteByte('{')
		for i, p := range ps {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(p)
		}
		b.WriteByte('}')
		lines = append(lines, b.String())
	}
	plain := 0
	for _, l := range lines {
		if _, ok := plainRequest([]byte(l)); ok {
			plain++
		}
		if !json.Valid([]byte(l)) {
			t.Fatalf("test line %s is not JSON", l)
		}
		got, gerr := decodeMessage([]byte(l))
		want, werr := jsonrpc.DecodeMessage([]byte(l))
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%s: error %v, the go-sdk's %v", l, gerr, werr)
		}
		if werr != nil {
			continue
		}
		switch w := want.(type) {
		case *jsonrpc.Request:
			g, ok := got.(*jsonrpc.Request)
			if !ok || g.ID != w.ID || g.Method != w.Method || !bytes.Equal(g.Params, w.Params) {
				t.Fatalf("%s: decoded %#v, the go-sdk %#v", l, got, w)
			}
		case *jsonrpc.Response:
			if _, ok := got.(*jsonrpc.Response); !ok {
				t.Fatalf("%s: decoded %#v, the go-sdk %#v", l, got, w)
			}
		}
	}
	// The comparison means something only if both paths ran.
	if _, ok := plainRequest([]byte(lines[0])); !ok || plain < 1000 || plain > len(lines)-1000 {
		t.Fatalf("decoded %d of %d lines without the go-sdk (the first: %v)", plain, len(lines), ok)
	}
}
