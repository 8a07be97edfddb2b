package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/bashvisor/bashvisor/internal/actors"
	"github.com/bashvisor/bashvisor/internal/egress"
	"github.com/bashvisor/bashvisor/internal/sandbox"
)

// systemBundles are where OpenSSL (curl, git, Python's ssl), Go and the
// distributions' patched certifi look for the system's CA bundle.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Alpine, Arch
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // RHEL's source of the above
	"/etc/ssl/cert.pem",                                 // Alpine, LibreSSL
}

// convBroker is a conversation's broker (egress.Broker.ForConversation:
// its own CA and placeholders) and what its sandboxed jobs get from it:
// the placeholders of the secrets read from variables, in those
// variables, and in place of every secret wherever it appears in any
// value of their final environment (the policy's, the engine's extra
// variables and the caller's overrides: "AUTH=Bearer SECRET" too); each
// secret file's placeholder over the file (a relative file: grant was
// made absolute by egress.NewBroker); and, with network, the CA bundle (the system's and the broker's CA) over the
// system's bundles, named by NODE_EXTRA_CA_CERTS and REQUESTS_CA_BUNDLE
// for Node and Python's requests, which do not read the system's.
type convBroker struct {
	b        *egress.Broker
	dir      string // holds the files below (hidden from the jobs)
	env      []string
	files    []sandbox.Mask
	trust    []sandbox.Mask
	trustEnv []string
}

// newConvBroker makes a conversation's broker and writes its files in dir
// (created; the caller removes it). The jobs' environment gets the
// placeholders in the variables the secrets were read from, and in every
// variable of base (the environment policy's) that holds one of them,
// in place of the secret.
func newConvBroker(b *egress.Broker, dir string, base []string) (*convBroker, error) {
	cb, err := b.ForConversation()
	if err != nil {
		return nil, err
	}
	c := &convBroker{b: cb, dir: dir, env: cb.Env()}
	for _, kv := range base {
		if hidden := cb.Hide(kv); hidden != kv {
			c.env = append(c.env, hidden)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for i, g := range cb.Grants() {
		path, ok := strings.CutPrefix(g.Ref, "file:")
		if !ok {
			continue
		}
		src := filepath.Join(dir, "placeholder-"+strconv.Itoa(i))
		if err := os.WriteFile(src, []byte(g.Placeholder+"\n"), 0o600); err != nil {
			return nil, err
		}
		c.files = append(c.files, sandbox.Mask{Path: path, Source: src})
	}
	var system []byte
	for _, p := range systemBundles {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("system CA bundle: %w", err)
		}
		if system == nil {
			system = data
			c.trustEnv = []string{"NODE_EXTRA_CA_CERTS=" + p, "REQUESTS_CA_BUNDLE=" + p}
		}
	}
	if system == nil {
		return c, nil // nowhere to show the CA: brokered hosts fail verification
	}
	bundle := filepath.Join(dir, "ca-bundle.pem")
	if len(system) > 0 && system[len(system)-1] != '\n' {
		system = append(system, '\n')
	}
	if err := os.WriteFile(bundle, append(system, cb.CA()...), 0o600); err != nil {
		return nil, err
	}
	for _, p := range systemBundles {
		c.trust = append(c.trust, sandbox.Mask{Path: p, Source: bundle})
	}
	return c, nil
}

// apply gives a sandboxed job the conversation's placeholders (in its
// extra variables and overrides too), and with network its broker and CA
// bundle.
func (c *convBroker) apply(spec *actors.Spec) {
	extra := make([]string, 0, len(spec.ExtraEnv)+len(c.env)+len(c.trustEnv))
	for _, kv := range spec.ExtraEnv {
		extra = append(extra, c.b.Hide(kv))
	}
	spec.ExtraEnv = append(extra, c.env...)
	if len(spec.Env) > 0 {
		env := make(map[string]string, len(spec.Env))
		for k, v := range spec.Env {
			env[k] = c.b.Hide(v)
		}
		spec.Env = env
	}
	spec.Masks = c.files
	if spec.Sandbox.Network != nil {
		spec.Sandbox.Broker = c.b
		spec.Masks = append(slices.Clip(c.files), c.trust...)
		spec.ExtraEnv = append(spec.ExtraEnv, c.trustEnv...)
	}
}

// getBroker returns the conversation's broker, making it on first use
// (nil: the engine brokers no secrets).
func (w *workspace) getBroker() (*convBroker, error) {
	if w.s.broker == nil {
		return nil, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broker != nil {
		return w.broker, nil
	}
	if w.closed {
		return nil, ErrShutdown
	}
	dir := filepath.Join(w.s.outDir, w.key+".broker")
	base, _ := w.s.res.Env.With(nil, nil)
	cb, err := newConvBroker(w.s.broker, dir, base)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("the conversation's credential broker: %w", err)
	}
	w.broker = cb
	return cb, nil
}
