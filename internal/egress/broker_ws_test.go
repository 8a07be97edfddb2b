package egress

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"pgregory.net/rapid"
)

// wsFrame encodes an unmasked frame.
func wsFrame(fin bool, opcode byte, payload []byte) []byte {
	h := []byte{opcode, 0}
	if fin {
		h[0] |= 0x80
	}
	switch n := len(payload); {
	case n < 126:
		h[1] = byte(n)
	case n <= 0xffff:
		h[1] = 126
		h = binary.BigEndian.AppendUint16(h, uint16(n))
	default:
		h[1] = 127
		h = binary.BigEndian.AppendUint64(h, uint64(n))
	}
	return append(h, payload...)
}

// wsParsed is a frame read back by readFrame.
type wsParsed struct {
	fin     bool
	opcode  byte
	payload []byte
}

// readFrame reads one frame as a client would, failing on what RFC 6455
// forbids a server: a mask, reserved bits, a control frame over 125 bytes
// or fragmented.
func readFrame(r io.Reader) (wsParsed, error) {
	var h [10]byte
	if _, err := io.ReadFull(r, h[:2]); err != nil {
		return wsParsed{}, err
	}
	f := wsParsed{fin: h[0]&0x80 != 0, opcode: h[0] & 0x0f}
	size := uint64(h[1] & 0x7f)
	switch {
	case h[0]&0x70 != 0 || h[1]&0x80 != 0:
		return f, fmt.Errorf("reserved bits or a mask: %x", h[:2])
	case f.opcode&8 != 0 && (size > 125 || !f.fin):
		return f, fmt.Errorf("a bad control frame: %x", h[:2])
	case size == 126:
		if _, err := io.ReadFull(r, h[2:4]); err != nil {
			return f, err
		}
		size = uint64(binary.BigEndian.Uint16(h[2:]))
		if size < 126 {
			return f, fmt.Errorf("length %d not minimal", size)
		}
	case size == 127:
		if _, err := io.ReadFull(r, h[2:10]); err != nil {
			return f, err
		}
		size = binary.BigEndian.Uint64(h[2:])
		if size <= 0xffff {
			return f, fmt.Errorf("length %d not minimal", size)
		}
	}
	f.payload = make([]byte, size)
	_, err := io.ReadFull(r, f.payload)
	return f, err
}

// wsEvents reads a server's stream to its end as a client would and
// lists what it hands on: "ping:PAYLOAD" (any control frame, by its
// opcode) and "text:MESSAGE" (any data message), in order; a frame out
// of place (a continuation with no message open, a message begun inside
// another) fails.
func wsEvents(r io.Reader) ([]string, error) {
	var events []string
	var msg []byte
	open := false
	for {
		f, err := readFrame(r)
		if err == io.EOF && !open {
			return events, nil
		}
		if err != nil {
			return events, err
		}
		if f.opcode&8 != 0 {
			events = append(events, fmt.Sprintf("%x:%s", f.opcode, f.payload))
			continue
		}
		if (f.opcode == 0) != open {
			return events, fmt.Errorf("frame %x with a message open: %v", f.opcode, open)
		}
		if !open {
			msg = fmt.Appendf(nil, "%x:", f.opcode)
		}
		msg = append(msg, f.payload...)
		open = !f.fin
		if f.fin {
			events = append(events, string(msg))
		}
	}
}

// TestWSScrubProperty: over generated server streams — messages holding
// the secret as is and in base64, each cut into generated fragments with
// pings (some holding the secret) between them, the whole read in
// generated sizes — the client reads the same control frames and
// messages in the same order (no control frame waits for a message's
// rest), each with the placeholder in place of the secret, and every
// frame well-formed.
func TestWSScrubProperty(t *testing.T) {
	ph := Placeholder(oddSecret)
	m := newMatcher(secretForms(oddSecret, ph))
	rapid.Check(t, func(t *rapid.T) {
		var in bytes.Buffer
		var want []string
		for range rapid.IntRange(0, 6).Draw(t, "messages") {
			parts := rapid.SliceOf(rapid.OneOf(rapid.Just(oddSecret), rapid.StringMatching(`[a-z "{}:]{0,9}`))).Draw(t, "parts")
			plain, scrubbed := strings.Join(parts, ""), strings.Join(parts, "")
			scrubbed = strings.ReplaceAll(scrubbed, oddSecret, ph)
			if rapid.Bool().Draw(t, "base64") {
				plain, scrubbed = base64.StdEncoding.EncodeToString([]byte(plain)), base64.StdEncoding.EncodeToString([]byte(scrubbed))
			}
			opcode := byte(rapid.IntRange(1, 2).Draw(t, "opcode"))
			cuts := rapid.SliceOf(rapid.IntRange(0, len(plain))).Draw(t, "cuts")
			at := 0
			for i, c := range append(cuts, len(plain)) {
				c = max(c, at)
				op := opcode
				if i > 0 {
					op = 0
				}
				in.Write(wsFrame(c == len(plain) && i == len(cuts), op, []byte(plain[at:c])))
				at = c
				if i < len(cuts) && rapid.IntRange(0, 3).Draw(t, "ping") == 0 {
					p := rapid.SampledFrom([]string{"", "p", "a " + oddSecret}).Draw(t, "payload")
					in.Write(wsFrame(true, 9, []byte(p)))
					want = append(want, "9:"+strings.ReplaceAll(p, oddSecret, ph))
				}
			}
			want = append(want, fmt.Sprintf("%x:%s", opcode, scrubbed))
		}
		in.Write(wsFrame(true, 8, []byte("\x03\xe8bye "+oddSecret)))
		want = append(want, "8:\x03\xe8bye "+ph)
		sizes := rapid.SliceOfN(rapid.IntRange(1, 60), 1, 10).Draw(t, "sizes")
		buf := make([]byte, scrubSize(m)-32<<10+rapid.IntRange(1, 40).Draw(t, "room"))
		w := &wsScrub{ReadWriteCloser: rwc{&chunked{r: &in, sizes: sizes}}, m: m, buf: buf}
		got, err := wsEvents(&chunked{r: w, sizes: []int{rapid.IntRange(1, 64).Draw(t, "out")}})
		if err != nil || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("got %q, want %q (%v)", got, want, err)
		}
	})
}

// rwc is a reader as an io.ReadWriteCloser.
type rwc struct{ io.Reader }

func (rwc) Write(p []byte) (int, error) { return len(p), nil }
func (rwc) Close() error                { return nil }

// TestWSScrubDelaysOnlyASecretsStart: over a connection, a fragment
// ending in the start of the secret goes on at once but for that start;
// a ping that follows reaches the client while the server sends nothing
// more; the secret's rest in the next fragment ends the message with the
// placeholder whole.
func TestWSScrubDelaysOnlyASecretsStart(t *testing.T) {
	ph := Placeholder(oddSecret)
	server, proxy := net.Pipe()
	defer server.Close()
	m := newMatcher(secretForms(oddSecret, ph))
	w := &wsScrub{ReadWriteCloser: proxy, m: m, buf: make([]byte, scrubSize(m))}
	defer w.Close()
	frames := make(chan wsParsed)
	errs := make(chan error, 1)
	go func() {
		defer close(frames)
		for {
			f, err := readFrame(w)
			if err != nil {
				errs <- err
				return
			}
			frames <- f
		}
	}()
	next := func(what string) wsParsed {
		t.Helper()
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("%s: %v", what, <-errs)
			}
			return f
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: nothing passed in 30 s", what)
		}
		return wsParsed{}
	}
	write := func(b []byte) {
		t.Helper()
		if _, err := server.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	write(wsFrame(false, 1, []byte("hello "+oddSecret[:9])))
	if f := next("the fragment"); f.fin || f.opcode != 1 || string(f.payload) != "hello " {
		t.Errorf("the fragment: %+v", f)
	}
	write(wsFrame(true, 9, []byte("ping")))
	if f := next("the ping"); f.opcode != 9 || string(f.payload) != "ping" {
		t.Errorf("the ping: %+v", f)
	}
	write(wsFrame(true, 0, []byte(oddSecret[9:]+"!")))
	if f := next("the message's end"); !f.fin || f.opcode != 0 || string(f.payload) != ph+"!" {
		t.Errorf("the message's end: %+v, want %q", f, ph+"!")
	}
	server.Close()
	if f, ok := <-frames; ok {
		t.Errorf("after the end: %+v", f)
	}
	if err := <-errs; err != io.EOF {
		t.Errorf("the end: %v", err)
	}
}

// TestBrokerWebSocketSplitSecret: a broker host that sends the secret
// back (as is and in base64) in a message of one-byte frames, or of
// frames cut inside the secret, reaches the client (coder/websocket) as
// the placeholder.
func TestBrokerWebSocketSplitSecret(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, up, ph, _ := secretBroker(t, oddSecret, func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		secret := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		for {
			_, msg, err := ws.Read(ctx)
			if err != nil {
				return
			}
			size, text, _ := strings.Cut(string(msg), " ")
			out := strings.ReplaceAll(text, "SECRET", secret)
			out = strings.ReplaceAll(out, "B64", base64.StdEncoding.EncodeToString([]byte(secret)))
			n, _ := strconv.Atoi(size)
			mw, err := ws.Writer(ctx, websocket.MessageText)
			if err != nil {
				return
			}
			for i := 0; i < len(out); i += n {
				if _, err := mw.Write([]byte(out[i:min(i+n, len(out))])); err != nil {
					return
				}
			}
			if mw.Close() != nil {
				return
			}
		}
	})
	ws, _, err := websocket.Dial(ctx, "wss://"+up.hostport()+"/echo", &websocket.DialOptions{
		HTTPClient: c, HTTPHeader: http.Header{"Authorization": {"Bearer " + ph}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	for _, msg := range []string{"1 SECRET", "1 a SECRET b B64 c", "5 xSECRET", "13 ab SECRET SECRET", "7 B64B64", "3 " + ph} {
		if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, text, _ := strings.Cut(msg, " ")
		want := strings.ReplaceAll(strings.ReplaceAll(text, "SECRET", ph), "B64", base64.StdEncoding.EncodeToString([]byte(ph)))
		if string(got) != want || strings.Contains(string(got), oddSecret) {
			t.Errorf("sent %q, got %q, want %q", msg, got, want)
		}
	}
	ws.Close(websocket.StatusNormalClosure, "")
}

// BenchmarkWSScrub: BenchmarkScrub's 4 MiB (all forms of testSecret) as
// one WebSocket message, in one frame and in 4 KiB frames, through
// wsScrub (re-framed), beside scrubBody on the bare bytes.
func BenchmarkWSScrub(b *testing.B) {
	body := bytes.Repeat([]byte("0123456789abcdef ghp_ placeholder-free text\n"), 4<<20/45)
	m := newMatcher(secretForms(testSecret, Placeholder(testSecret)))
	b.Run("body", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if n, _ := io.Copy(io.Discard, newScrubBody(io.NopCloser(bytes.NewReader(body)), m, func() {})); n != int64(len(body)) {
				b.Fatal(n)
			}
		}
	})
	for _, v := range []struct {
		name string
		size int
	}{{"websocket-one-frame", len(body)}, {"websocket-4KiB-frames", 4 << 10}} {
		size := v.size
		var stream []byte
		for at := 0; at < len(body); at += size {
			op := byte(2)
			if at > 0 {
				op = 0
			}
			stream = append(stream, wsFrame(at+size >= len(body), op, body[at:min(at+size, len(body))])...)
		}
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				w := &wsScrub{ReadWriteCloser: rwc{bytes.NewReader(stream)}, m: m, buf: make([]byte, scrubSize(m))}
				if n, _ := io.Copy(io.Discard, w); n < int64(len(body)) {
					b.Fatal(n)
				}
			}
		})
	}
}
