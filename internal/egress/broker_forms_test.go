package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"pgregory.net/rapid"
)

// oddSecret has the characters JSON and URLs escape.
const oddSecret = `sk-Ab3/dE+f9<gH&i8jK"l\m=n0p`

// transforms are the ways TestBrokerScrubsTransformedSecret's host sends
// the secret back, each applied alike to the placeholder for what the
// client should read.
var transforms = map[string]func(string) string{
	"raw": func(s string) string { return s },
	"json-go": func(s string) string { // \u003c, \u0026, \", \\
		b, _ := json.Marshal(s)
		return string(b)
	},
	"json-slash": func(s string) string {
		b, _ := json.Marshal(s)
		return strings.ReplaceAll(string(b), "/", `\/`)
	},
	"json-u-all": func(s string) string {
		var b strings.Builder
		for _, c := range []byte(s) {
			fmt.Fprintf(&b, `\u%04X`, c)
		}
		return b.String()
	},
	"query":       url.QueryEscape,
	"path":        url.PathEscape,
	"query-lower": func(s string) string { return lowerHex(url.QueryEscape(s)) },
	"b64-std":     func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
	"b64-raw-url": func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) },
	"b64-in-1":    func(s string) string { return base64.StdEncoding.EncodeToString([]byte(`{"t":"` + s + `"}`)) },
	"b64-in-2":    func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(`{"tk":"` + s + `"}`)) },
	"b64-in-3":    func(s string) string { return base64.StdEncoding.EncodeToString([]byte(`{"tok":"` + s + `"}` + "\n")) },
}

// lowerHex lower-cases the hex of %XX escapes.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = strings.ToLower(string(b[i+1]))[0], strings.ToLower(string(b[i+2]))[0]
		}
	}
	return string(b)
}

// secretBroker is echoBroker for secret (not testSecret).
func secretBroker(t *testing.T, secret string, h http.HandlerFunc) (*http.Client, *upstream, string, *Broker) {
	t.Helper()
	up := newUpstream(t, true, h)
	t.Setenv("BASHVISOR_TEST_TOKEN", secret)
	b, err := NewBroker([]string{up.hostport() + "=env:BASHVISOR_TEST_TOKEN"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.roots = pkiOnce().pool
	_, addr := startProxy(t, Policy{Allow: allow(t, up.hostport()), Broker: b})
	pool := pkiOnce().pool.Clone()
	pool.AppendCertsFromPEM(b.CA())
	tr := &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr}), TLSClientConfig: &tls.Config{RootCAs: pool},
		DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}, up, b.Grants()[0].Placeholder, b
}

// TestBrokerScrubsTransformedSecret: a broker host that sends the secret
// back URL-escaped, JSON-escaped (Go's \u003c, \/, every character
// \u-escaped) or in base64 (standard or URL alphabet, padded or not, on
// its own or inside an encoded whole at each alignment), in a body and in
// a header, reaches the client as the placeholder transformed the same
// way — also with the body written a byte at a time.
func TestBrokerScrubsTransformedSecret(t *testing.T) {
	for _, secret := range []string{oddSecret, testSecret} {
		c, up, ph, _ := secretBroker(t, secret, func(w http.ResponseWriter, r *http.Request) {
			got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			out := "<" + transforms[r.URL.Query().Get("form")](got) + ">"
			w.Header().Set("X-Echo", out)
			w.Header().Set("Content-Length", fmt.Sprint(len(out)))
			if r.URL.Query().Has("bytewise") {
				for i := range len(out) {
					io.WriteString(w, out[i:i+1])
					w.(http.Flusher).Flush()
				}
				return
			}
			io.WriteString(w, out)
		})
		for name, tr := range transforms {
			for _, q := range []string{"", "&bytewise=1"} {
				req, _ := http.NewRequest("GET", "https://"+up.hostport()+"/?form="+name+q, nil)
				req.Header.Set("Authorization", "Bearer "+ph)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				want := "<" + tr(ph) + ">"
				if string(body) != want || resp.Header.Get("X-Echo") != want {
					t.Errorf("%s %s%s: body %q header %q, want %q (the secret's form %q)", secret, name, q, body, resp.Header.Get("X-Echo"), want, tr(secret))
				}
			}
		}
	}
}

// TestSecretFormsSameLength: for any secret a broker accepts, each form
// of its placeholder is as long as the secret's (Content-Length and
// WebSocket frame lengths rely on it), and none is empty.
func TestSecretFormsSameLength(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		secret := rapid.StringMatching(`[!-~]{8,60}`).Draw(t, "secret")
		if checkSecret(secret) != nil {
			t.Skip("not a secret the broker takes")
		}
		fs := secretForms(secret, Placeholder(secret))
		if !sameLength(fs) || len(fs) < 2 {
			t.Fatalf("%d forms, same length %v", len(fs), sameLength(fs))
		}
		for _, f := range fs {
			if len(f.old) == 0 {
				t.Fatal("an empty form")
			}
		}
	})
}

// TestScrubBase64Property: over generated bodies holding the secret,
// base64-encoded whole (either alphabet, padded or not) and read in
// generated chunk sizes, the scrubbed stream is the encoding of the body
// with the placeholder in place of each secret.
func TestScrubBase64Property(t *testing.T) {
	ph := Placeholder(oddSecret)
	fs := secretForms(oddSecret, ph)
	encs := []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOf(rapid.OneOf(rapid.Just(oddSecret), rapid.StringMatching(`[a-z "{}:]{0,7}`))).Draw(t, "parts")
		enc := encs[rapid.IntRange(0, 3).Draw(t, "enc")]
		plain := strings.Join(parts, "")
		body, want := enc.EncodeToString([]byte(plain)), enc.EncodeToString([]byte(strings.ReplaceAll(plain, oddSecret, ph)))
		sizes := rapid.SliceOfN(rapid.IntRange(1, 50), 1, 10).Draw(t, "sizes")
		s := &scrubBody{rc: io.NopCloser(&chunked{r: strings.NewReader(body), sizes: sizes}), m: newMatcher(fs), buf: make([]byte, 200), eof: func() {}}
		got, err := io.ReadAll(&chunked{r: s, sizes: []int{rapid.IntRange(1, 64).Draw(t, "out")}})
		if err != nil || string(got) != want {
			t.Fatalf("got %q, want %q (%v)", got, want, err)
		}
	})
}

// TestBrokerWebSocket: a WebSocket to a broker host is let through (it
// was a 502): the host's handshake gets the secret in Authorization and
// no Sec-WebSocket-Extensions even when the client offers compression;
// the messages it echoes — the secret alone, inside text, split over
// reads, in base64, in a large frame, in a close reason — reach the
// client with the placeholder, every frame whole (the client library
// checks their lengths); what the client sends reaches the host as sent.
func TestBrokerWebSocket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	handshake := make(chan http.Header, 1)
	c, up, ph, _ := secretBroker(t, oddSecret, func(w http.ResponseWriter, r *http.Request) {
		handshake <- r.Header.Clone()
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionContextTakeover})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ws.SetReadLimit(1 << 20)
		secret := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		for {
			typ, msg, err := ws.Read(ctx)
			if err != nil {
				return
			}
			out := strings.ReplaceAll(string(msg), "SECRET", secret)
			out = strings.ReplaceAll(out, "B64", base64.StdEncoding.EncodeToString([]byte(secret)))
			if out == "close" {
				ws.Close(websocket.StatusNormalClosure, "bye "+secret)
				return
			}
			if err := ws.Write(ctx, typ, []byte(out)); err != nil {
				return
			}
		}
	})
	ws, resp, err := websocket.Dial(ctx, "wss://"+up.hostport()+"/echo", &websocket.DialOptions{
		HTTPClient:      c,
		HTTPHeader:      http.Header{"Authorization": {"Bearer " + ph}},
		CompressionMode: websocket.CompressionContextTakeover,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	ws.SetReadLimit(1 << 20)
	h := <-handshake
	if h.Get("Authorization") != "Bearer "+oddSecret || h.Get("Sec-Websocket-Extensions") != "" {
		t.Errorf("the host's handshake: %v", h)
	}
	if resp.Header.Get("Sec-Websocket-Extensions") != "" {
		t.Errorf("compression negotiated: %v", resp.Header)
	}
	big := strings.Repeat("x", 70000) + "SECRET" + strings.Repeat("y", 100)
	for _, msg := range []string{"SECRET", "a SECRET b SECRET", "B64", "g", big, "sent as is: " + ph} {
		if err := ws.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.ReplaceAll(strings.ReplaceAll(msg, "SECRET", ph), "B64", base64.StdEncoding.EncodeToString([]byte(ph)))
		if string(got) != want || strings.Contains(string(got), oddSecret) {
			t.Errorf("sent %.40q, got %.40q (%d bytes), want %.40q", msg, got, len(got), want)
		}
	}
	ws.Write(ctx, websocket.MessageText, []byte("close"))
	_, _, err = ws.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != "bye "+ph {
		t.Errorf("close: %v", err)
	}
}

// BenchmarkScrub: scrubbing BenchmarkBrokerBody's 4 MiB body of
// testSecret as is only, and of all its forms (secretForms).
func BenchmarkScrub(b *testing.B) {
	body := bytes.Repeat([]byte("0123456789abcdef ghp_ placeholder-free text\n"), 4<<20/45)
	ph := Placeholder(testSecret)
	for _, v := range []struct {
		name  string
		forms []form
	}{{"literal", []form{literalForm(testSecret, ph)}}, {"forms", secretForms(testSecret, ph)}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				s := newScrubBody(io.NopCloser(bytes.NewReader(body)), newMatcher(v.forms), func() {})
				if n, _ := io.Copy(io.Discard, s); n != int64(len(body)) {
					b.Fatal(n)
				}
			}
		})
	}
}
