package egress

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// echoBroker is a proxy brokering testSecret (also into X-Api-Key) for
// an upstream running h, and a client trusting the broker's CA.
func echoBroker(t *testing.T, h http.HandlerFunc) (*http.Client, *upstream, string) {
	t.Helper()
	up := newUpstream(t, true, h)
	t.Setenv("BASHVISOR_TEST_TOKEN", testSecret)
	b, err := NewBroker([]string{up.hostport() + "=env:BASHVISOR_TEST_TOKEN,header=x-api-key"}, nil)
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
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}, up, b.Grants()[0].Placeholder
}

// TestBrokerReflectedHeaderKeepsSecret: a host that quotes request
// headers back (GitHub quotes X-GitHub-Api-Version in its error body)
// gets the secret only in Authorization and the header the grant names;
// the placeholder in any other header stays a placeholder; and whatever
// the host echoes — body, headers, a 103's headers, trailers — reaches the client with
// the placeholder in place of the secret.
func TestBrokerReflectedHeaderKeepsSecret(t *testing.T) {
	var got http.Header
	c, up, ph := echoBroker(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.Header().Set("Link", r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Set("Trailer", "X-Echo")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(r.Header)
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
	})
	req, _ := http.NewRequest("GET", "https://"+up.hostport()+"/user", nil)
	req.Header.Set("Authorization", "Bearer "+ph)
	req.Header.Set("X-Api-Key", ph)
	req.Header.Set("X-GitHub-Api-Version", ph)
	req.Header.Set("Cookie", "t="+ph)
	var early []string
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		early = append(early, h.Get("Link"))
		return nil
	}}))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got.Get("Authorization") != "Bearer "+testSecret || got.Get("X-Api-Key") != testSecret {
		t.Errorf("the host did not get the secret where granted: %v", got)
	}
	if got.Get("X-Github-Api-Version") != ph || got.Get("Cookie") != "t="+ph {
		t.Errorf("the secret went into another header: %v", got)
	}
	if bytes.Contains(body, []byte(testSecret)) || !bytes.Contains(body, []byte("Bearer "+ph)) {
		t.Errorf("the client read %s", body)
	}
	if len(early) != 1 || early[0] != "Bearer "+ph {
		t.Errorf("103 headers %q", early)
	}
	if resp.Trailer.Get("X-Echo") != "Bearer "+ph {
		t.Errorf("trailer %q", resp.Trailer.Get("X-Echo"))
	}
}

// TestBrokerScrubsBody: a secret in a body is replaced wherever the
// host's writes split it, the body keeps its Content-Length, a gzip body
// is decoded to be read (the client's Accept-Encoding is not passed), and
// a body in an encoding the proxy cannot read, a protocol upgrade other
// than to WebSocket, or a WebSocket with an extension (compression), is
// refused (a HEAD's headers naming an encoding are not).
func TestBrokerScrubsBody(t *testing.T) {
	c, up, ph := echoBroker(t, func(w http.ResponseWriter, r *http.Request) {
		body := []byte("before " + r.Header.Get("Authorization") + " after")
		switch k, _ := strconv.Atoi(r.URL.Query().Get("split")); r.URL.Path {
		case "/split":
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body[:k])
			w.(http.Flusher).Flush()
			time.Sleep(10 * time.Millisecond)
			w.Write(body[k:])
		case "/gzip":
			if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") || strings.Contains(r.Header.Get("Accept-Encoding"), "br") {
				http.Error(w, "accept-encoding "+r.Header.Get("Accept-Encoding"), 400)
				return
			}
			w.Header().Set("Content-Encoding", "gzip")
			z := gzip.NewWriter(w)
			z.Write(body)
			z.Close()
		case "/br":
			w.Header().Set("Content-Encoding", "br")
			w.Write(body)
		case "/upgrade", "/deflate":
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", r.Header.Get("Upgrade"))
			if r.URL.Path == "/deflate" {
				w.Header().Set("Sec-WebSocket-Extensions", "permessage-deflate")
			}
			w.WriteHeader(http.StatusSwitchingProtocols)
			w.Write(body)
		}
	})
	get := func(path string, h ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "https://"+up.hostport()+path, nil)
		req.Header.Set("Authorization", "Bearer "+ph)
		for i := 0; i+1 < len(h); i += 2 {
			req.Header.Set(h[i], h[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	want := "before Bearer " + ph + " after"
	for k := 0; k <= len(want); k += 3 {
		resp, body := get("/split?split=" + strconv.Itoa(k))
		if body != want || resp.ContentLength != int64(len(want)) {
			t.Errorf("split at %d: %d bytes %q", k, resp.ContentLength, body)
		}
	}
	if resp, body := get("/gzip", "Accept-Encoding", "br"); resp.StatusCode != 200 || body != want {
		t.Errorf("gzip: %d %q", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("HEAD", "https://"+up.hostport()+"/br", nil)
	if resp, err := c.Do(req); err != nil {
		t.Error(err)
	} else if resp.Body.Close(); resp.StatusCode != 200 {
		t.Errorf("HEAD of a br body: %d", resp.StatusCode)
	}
	for path, upgrade := range map[string]string{"/br": "websocket", "/upgrade": "h2c", "/deflate": "websocket"} {
		resp, body := get(path, "Connection", "Upgrade", "Upgrade", upgrade)
		if resp.StatusCode != http.StatusBadGateway || strings.Contains(body, testSecret) {
			t.Errorf("%s: %d %q", path, resp.StatusCode, body)
		}
	}
}

// TestBrokerStreamsEvents: the scrubbing holds back only a tail that
// begins a secret, so a stream's event reaches the client before the host
// writes the next.
func TestBrokerStreamsEvents(t *testing.T) {
	next := make(chan struct{})
	c, up, _ := echoBroker(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			io.WriteString(w, "data: "+strconv.Itoa(i)+"\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-time.After(60 * time.Second):
				return
			}
		}
	})
	resp, err := c.Get("https://" + up.hostport() + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 64)
	for i := range 3 {
		var got []byte
		for want := "data: " + strconv.Itoa(i) + "\n\n"; len(got) < len(want); {
			n, err := resp.Body.Read(buf)
			if err != nil {
				t.Fatalf("event %d: %q %v", i, got, err)
			}
			got = append(got, buf[:n]...)
		}
		next <- struct{}{}
	}
}

// chunked reads r in the sizes given, cycling.
type chunked struct {
	r     io.Reader
	sizes []int
	i     int
}

func (c *chunked) Read(p []byte) (int, error) {
	n := min(len(p), c.sizes[c.i%len(c.sizes)])
	c.i++
	return c.r.Read(p[:n])
}

// TestScrubBodyProperty: over generated bodies holding secrets (two of
// different lengths, adjacent, at the ends) read in generated chunk
// sizes, the scrubbed stream is the body with each secret replaced by its
// placeholder.
func TestScrubBodyProperty(t *testing.T) {
	swaps := []swap{{placeholder: Placeholder(testSecret), secret: testSecret}, {placeholder: "sk-Pl4ceh0lder99", secret: "sk-S3cretT0ken42"}}
	rapid.Check(t, func(t *rapid.T) {
		parts := rapid.SliceOf(rapid.OneOf(rapid.Just(testSecret), rapid.Just("sk-S3cretT0ken42"), rapid.Just("ghp_R3al"),
			rapid.StringMatching(`[a-z ]{0,20}`))).Draw(t, "parts")
		body := strings.Join(parts, "")
		want := strings.ReplaceAll(strings.ReplaceAll(body, testSecret, swaps[0].placeholder), swaps[1].secret, swaps[1].placeholder)
		sizes := rapid.SliceOfN(rapid.IntRange(1, 50), 1, 10).Draw(t, "sizes")
		fs := []form{literalForm(swaps[0].secret, swaps[0].placeholder), literalForm(swaps[1].secret, swaps[1].placeholder)}
		s := &scrubBody{rc: io.NopCloser(&chunked{r: strings.NewReader(body), sizes: sizes}), m: newMatcher(fs), buf: make([]byte, 64), eof: func() {}}
		got, err := io.ReadAll(&chunked{r: s, sizes: []int{rapid.IntRange(1, 64).Draw(t, "out")}})
		if err != nil || string(got) != want {
			t.Fatalf("got %q, want %q (%v)", got, want, err)
		}
	})
}

// TestNewBrokerRefs: a relative file: grant is made absolute, a secret
// granted twice has one placeholder (here and per conversation), and a
// ",header=" suffix names a header (a bad name is refused).
func TestNewBrokerRefs(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tok"), []byte(testSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	t.Setenv("BASHVISOR_TEST_TOKEN", testSecret)
	b, err := NewBroker([]string{"a.com=file:tok", "b.com=env:BASHVISOR_TEST_TOKEN,header=X-Api-Key,header=x-other"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.ForConversation()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []*Broker{b, c} {
		g := b.Grants()
		if g[0].Ref != "file:"+filepath.Join(dir, "tok") || g[1].Ref != "env:BASHVISOR_TEST_TOKEN" || g[0].Placeholder != g[1].Placeholder {
			t.Errorf("grants %+v", g)
		}
		if h := b.secrets[flowKey{"b.com", 443}][0].headers; strings.Join(h, ",") != "X-Other,X-Api-Key" {
			t.Errorf("headers %q", h)
		}
		if got := b.Hide("URL=https://x:" + testSecret + "@h/ " + testSecret); got != "URL=https://x:"+g[0].Placeholder+"@h/ "+g[0].Placeholder {
			t.Errorf("Hide: %q", got)
		}
	}
	if b.Grants()[0].Placeholder == c.Grants()[0].Placeholder {
		t.Error("a conversation shares the placeholder")
	}
	for _, bad := range []string{"x.com=env:BASHVISOR_TEST_TOKEN,header=", "x.com=env:BASHVISOR_TEST_TOKEN,header=X:Y"} {
		if _, err := NewBroker([]string{bad}, nil); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// BenchmarkBrokerBody: a 4 MiB response body over a kept-alive
// connection through CONNECT, from a host spliced end to end and from a
// broker host (terminated, the body scrubbed), interleaved; each
// variant's median in ms.
func BenchmarkBrokerBody(b *testing.B) {
	body := bytes.Repeat([]byte("0123456789abcdef ghp_ placeholder-free text\n"), 4<<20/45)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) })
	spliced, brokeredUp := newUpstream(b, true, h), newUpstream(b, true, h)
	b.Setenv("BASHVISOR_TEST_TOKEN", testSecret)
	bk, err := NewBroker([]string{brokeredUp.hostport() + "=env:BASHVISOR_TEST_TOKEN"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	bk.roots = pkiOnce().pool
	_, addr := startProxy(b, Policy{Allow: allow(b, spliced.hostport(), brokeredUp.hostport()), Broker: bk})
	pool := pkiOnce().pool.Clone()
	pool.AppendCertsFromPEM(bk.CA())
	names, urls := []string{"spliced", "brokered"}, []string{"https://" + spliced.hostport() + "/", "https://" + brokeredUp.hostport() + "/"}
	samples, clients := make([][]float64, len(names)), make([]*http.Client, len(names))
	for i := range names {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: addr})}
		b.Cleanup(tr.CloseIdleConnections)
		clients[i] = &http.Client{Transport: tr}
	}
	for b.Loop() {
		for i := range names {
			start := time.Now()
			resp, err := clients[i].Get(urls[i])
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || n != int64(len(body)) {
				b.Fatalf("%s: %d, %d bytes", names[i], resp.StatusCode, n)
			}
			samples[i] = append(samples[i], float64(time.Since(start).Nanoseconds())/1e6)
		}
	}
	for i, name := range names {
		slices.Sort(samples[i])
		b.ReportMetric(samples[i][len(samples[i])/2], name+"-ms")
	}
}
