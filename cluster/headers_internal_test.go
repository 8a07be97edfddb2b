package cluster

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
)

// headerListMargin is how far under headerListMax the nodes' header
// lists must stay.
const headerListMargin = 2 << 10

// TestHeaderListBound measures the header lists a node sends, on the
// streams of protoactor's service and on a forwarded connection's, with a
// short token and a long one: each stays at least headerListMargin under
// the bound every node's server takes (headerListMax), and the dial
// options announce that bound.
func TestHeaderListBound(t *testing.T) {
	for _, token := range []string{"", strings.Repeat("t", 64), strings.Repeat("t", 16<<10)} {
		for _, method := range []string{"/remote.Remoting/Receive", forwardMethod} {
			size, announced := sentHeaderList(t, token, method)
			t.Logf("token of %d bytes, %s: header list %d bytes, bound %d", len(token), method, size, headerListMax(token))
			if size+headerListMargin > headerListMax(token) {
				t.Errorf("token of %d bytes, %s: header list of %d bytes, within %d of the bound %d", len(token), method, size, headerListMargin, headerListMax(token))
			}
			if announced != headerListMax(token) {
				t.Errorf("token of %d bytes: the client announced a header list bound of %d, want %d", len(token), announced, headerListMax(token))
			}
		}
	}
}

// sentHeaderList opens a stream of method with a node's dial options to
// a listener that speaks HTTP/2 and returns the size of its header list
// (RFC 9113's: each field's name and value plus 32) and the
// SETTINGS_MAX_HEADER_LIST_SIZE the client announced.
func sentHeaderList(t *testing.T, token, method string) (size, announced uint32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		size, announced uint32
		err             error
	}
	got := make(chan result, 1)
	go func() {
		var r result
		defer func() { got <- r }()
		conn, err := ln.Accept()
		if err != nil {
			r.err = err
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		preface := make([]byte, len(http2.ClientPreface))
		if _, r.err = io.ReadFull(conn, preface); r.err != nil {
			return
		}
		fr := http2.NewFramer(conn, conn)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		if r.err = fr.WriteSettings(); r.err != nil {
			return
		}
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				r.err = err
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if v, ok := f.Value(http2.SettingMaxHeaderListSize); ok {
					r.announced = v
				}
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
				}
			case *http2.MetaHeadersFrame:
				for _, hf := range f.Fields {
					r.size += hf.Size()
				}
				return
			}
		}
	}()
	cc, err := grpc.Dial(ln.Addr().String(), dialOptions(token)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opened := make(chan struct{})
	go func() {
		defer close(opened)
		_, _ = cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
	}()
	r := <-got
	cancel()
	<-opened
	if r.err != nil {
		t.Fatalf("reading the headers of %s: %v", method, r.err)
	}
	return r.size, r.announced
}
