package bearer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/bashvisor/bashvisor/mcpserver/internal/principal"
)

// MinTokenLength is the shortest bearer token a [TokenFile] accepts.
const MinTokenLength = 16

// TokenFile authenticates requests with the bearer tokens of a file: one
// "PRINCIPAL TOKEN" pair a line (blank lines and lines starting with "#"
// are ignored). A principal is 1 to 256 bytes of UTF-8 without spaces or
// control characters (the rule every principal follows), and does not
// start with "oauth:", which names the subjects of an [OAuthVerifier]. A
// principal may have several tokens (to rotate one
// without a gap); a token belongs to one principal and is at least
// [MinTokenLength] bytes long. The file is read again when it changes (its
// size, modification time or inode; looked at no more than once a second,
// on the next request): edits take effect without a restart, and a
// version that does not parse is refused with an error in the log while
// the previous tokens stay in force. A file readable by other users is
// logged as a warning each time it is read.
//
// Its Verify method is an [auth.TokenVerifier] for [HTTPOptions.Verifier].
// Tokens are compared in constant time: the SHA-256 digest of the token
// presented is compared with every known digest, without stopping at a
// match.
type TokenFile struct {
	path string
	log  *slog.Logger

	set     atomic.Pointer[tokenSet]
	checked atomic.Int64 // when the file was last looked at (unix ns)
	mu      sync.Mutex   // serialises reloads
}

// tokenSet is one version of a token file.
type tokenSet struct {
	stamp   fileStamp
	digests [][sha256.Size]byte
	owners  []string // principal of digests[i]
}

// fileStamp identifies a version of a file.
type fileStamp struct {
	size, mtime int64
	ino         uint64
}

// tokenFileCheck bounds how often a TokenFile looks for changes.
const tokenFileCheck = time.Second

// OpenTokenFile reads the token file at path; see [TokenFile]. log receives
// reload errors and warnings (nil: discard).
func OpenTokenFile(path string, log *slog.Logger) (*TokenFile, error) {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	f := &TokenFile{path: path, log: log}
	set, err := f.load()
	if err != nil {
		return nil, err
	}
	f.set.Store(set)
	f.checked.Store(time.Now().UnixNano())
	return f, nil
}

// Principals returns the principals the file names, in file order, each once.
func (f *TokenFile) Principals() []string {
	f.refresh()
	var out []string
	seen := map[string]bool{}
	for _, p := range f.set.Load().owners {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// Verify is an [auth.TokenVerifier]: it returns the principal of token as
// the TokenInfo's UserID, or an error wrapping [auth.ErrInvalidToken].
func (f *TokenFile) Verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	f.refresh()
	p, ok := f.set.Load().lookup(token)
	if !ok {
		return nil, fmt.Errorf("%w: unknown bearer token", auth.ErrInvalidToken)
	}
	return staticTokenInfo(p), nil
}

// staticTokenInfo is the TokenInfo of a token that does not expire (the
// go-sdk's middleware wants an expiration: a token file's tokens are
// valid until the file changes).
func staticTokenInfo(p string) *auth.TokenInfo {
	return &auth.TokenInfo{UserID: p, Expiration: time.Now().Add(time.Hour)}
}

// lookup finds the principal of token in constant time over the set.
func (s *tokenSet) lookup(token string) (string, bool) {
	got := sha256.Sum256([]byte(token))
	found := -1
	for i := range s.digests {
		if subtle.ConstantTimeCompare(got[:], s.digests[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return s.owners[found], true
}

// refresh reloads the file if it changed, at most once per tokenFileCheck.
func (f *TokenFile) refresh() {
	now := time.Now().UnixNano()
	last := f.checked.Load()
	if now-last < int64(tokenFileCheck) || !f.checked.CompareAndSwap(last, now) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := stampOf(f.path)
	if err != nil {
		f.log.Error("token file: keeping the tokens read before", "path", f.path, "err", err)
		return
	}
	if st == f.set.Load().stamp {
		return
	}
	set, err := f.load()
	if err != nil {
		f.log.Error("token file: keeping the tokens read before", "path", f.path, "err", err)
		return
	}
	f.set.Store(set)
	f.log.Info("token file reloaded", "path", f.path, "tokens", len(set.digests))
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st := fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st, nil
}

// load reads and parses the file.
func (f *TokenFile) load() (*tokenSet, error) {
	fh, err := os.Open(f.path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		f.log.Warn("token file is readable or writable by other users; chmod 600 it", "path", f.path, "mode", fi.Mode().Perm().String())
	}
	data, err := io.ReadAll(io.LimitReader(fh, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	set, err := parseTokens(data)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", f.path, err)
	}
	set.stamp = fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		set.stamp.ino = sys.Ino
	}
	return set, nil
}

// parseTokens parses a token file's content. Error messages never quote a
// token.
func parseTokens(data []byte) (*tokenSet, error) {
	set := &tokenSet{}
	seen := map[[sha256.Size]byte]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want \"PRINCIPAL TOKEN\", got %d fields", n, len(fields))
		}
		p, tok := fields[0], fields[1]
		if strings.HasPrefix(p, principalOAuthPrefix) {
			return nil, fmt.Errorf("line %d: principal %.80q: %q starts the principals of OAuth subjects", n, p, principalOAuthPrefix)
		}
		if err := principal.Check(p); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if len(tok) < MinTokenLength {
			return nil, fmt.Errorf("line %d: the token of %s is shorter than %d bytes", n, p, MinTokenLength)
		}
		d := sha256.Sum256([]byte(tok))
		if seen[d] {
			return nil, fmt.Errorf("line %d: the token of %s appears twice in the file", n, p)
		}
		seen[d] = true
		set.digests = append(set.digests, d)
		set.owners = append(set.owners, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(set.digests) == 0 {
		return nil, errors.New("no tokens")
	}
	return set, nil
}
