package cli

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/egress"
)

// sandboxFlags are the sandbox settings of run, mcp and schema: -sandbox
// (with -restricted as the alias of -sandbox read-only), -allow-net,
// -broker, -proxy-env, -writable, -cache-dir and -base-caches.
type sandboxFlags struct {
	profile    string
	restricted bool
	allowNet   stringList
	broker     stringList
	proxyEnv   bool
	writable   stringList
	cacheDir   string
	baseCaches bool
}

func (f *sandboxFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.profile, "sandbox", "none", "sandbox `profile`: none, read-only (write only $TMPDIR and build caches) or workspace-write (also the working directory and its git directory; hooks and config stay read-only)")
	fs.BoolVar(&f.restricted, "restricted", false, "same as -sandbox read-only")
	fs.Var(&f.allowNet, "allow-net", "let sandboxed commands reach these `hosts` through the egress proxy: domains, *.domains, host:port, presets npm, pypi, go, crates, debian, github, playwright (comma-separated, repeatable; default: no network)")
	fs.Var(&f.broker, "broker", "let the egress proxy put a secret into sandboxed commands' requests to a host, which they see only as a placeholder: `host=env:NAME` (this process's variable NAME; the sandbox's NAME holds the placeholder), host=file:PATH (the file's content; the sandbox sees the placeholder there), host:port=... for a port other than 443; append ,header=NAME for a header besides Authorization that carries the secret; the host must be allowed by -allow-net too (repeatable)")
	fs.BoolVar(&f.proxyEnv, "proxy-env", false, "export HTTP_PROXY, HTTPS_PROXY and the package managers' proxy settings to sandboxed commands with network even where the conversation's resolver carries their connections without them")
	fs.Var(&f.writable, "writable", "another `dir`ectory workspace-write may write (repeatable)")
	fs.StringVar(&f.cacheDir, "cache-dir", "", "make each conversation's sandbox directory (its /tmp and build caches are mounted there) under `dir` (default: in the engine's output directory)")
	fs.BoolVar(&f.baseCaches, "base-caches", true, "give sandboxed commands this user's Go build and module caches, npm cache and pip cache at their own paths (where go env GOCACHE GOMODCACHE, npm config get cache and pip cache dir would name them: found by the tools' rules, without running them), each the conversation's overlay on the user's, which it never changes; false: those caches start empty, elsewhere, named by GOCACHE, npm_config_cache, PIP_CACHE_DIR and XDG_CACHE_HOME")
}

// sandbox returns the engine sandbox the flags describe.
func (f *sandboxFlags) sandbox() (engine.Sandbox, error) {
	p, err := engine.ParseProfile(f.profile)
	if err != nil {
		return engine.Sandbox{}, fmt.Errorf("-sandbox: %w", err)
	}
	if f.restricted {
		if p != engine.Unrestricted && p != engine.ReadOnly {
			return engine.Sandbox{}, fmt.Errorf("-restricted means -sandbox read-only, not %s", p)
		}
		p = engine.ReadOnly
	}
	s := engine.Sandbox{Profile: p}
	if f.cacheDir != "" {
		if _, err := filepath.Abs(f.cacheDir); err != nil {
			return engine.Sandbox{}, fmt.Errorf("-cache-dir: %w", err)
		}
	}
	if len(f.writable) > 0 {
		if p != engine.WorkspaceWrite {
			return engine.Sandbox{}, fmt.Errorf("-writable needs -sandbox workspace-write")
		}
		for _, w := range f.writable {
			abs, err := filepath.Abs(w)
			if err != nil {
				return engine.Sandbox{}, fmt.Errorf("-writable: %w", err)
			}
			s.Writable = append(s.Writable, abs)
		}
	}
	if len(f.allowNet) > 0 {
		if p == engine.Unrestricted {
			return engine.Sandbox{}, fmt.Errorf("-allow-net needs a sandbox (-sandbox read-only or workspace-write): unrestricted commands have the host's network")
		}
		var entries []string
		for _, v := range f.allowNet {
			entries = append(entries, strings.Split(v, ",")...)
		}
		if _, err = egress.ParseAllowlist(entries); err != nil {
			return engine.Sandbox{}, fmt.Errorf("-allow-net: %w", err)
		}
		s.Network = entries
	}
	if len(f.broker) > 0 && p == engine.Unrestricted {
		return engine.Sandbox{}, fmt.Errorf("-broker needs a sandbox (-sandbox read-only or workspace-write): unrestricted commands see the engine's environment and files")
	}
	for _, b := range f.broker {
		if host, ref, ok := strings.Cut(b, "="); !ok || host == "" || ref == "" {
			return engine.Sandbox{}, fmt.Errorf("-broker %q: want host=env:NAME or host=file:PATH", b)
		}
	}
	return s, nil
}

// apply sets the engine configuration's brokered secrets, proxy
// variables, cache directory and base caches.
func (f *sandboxFlags) apply(c *engine.Config) error {
	c.Broker, c.ProxyEnv = f.broker, f.proxyEnv
	if p, err := f.sandbox(); f.baseCaches && err == nil && p.On() {
		dir, _ := os.Getwd()
		c.Sandbox.BaseCaches = userCaches(dir)
	}
	if f.cacheDir == "" {
		return nil
	}
	abs, err := filepath.Abs(f.cacheDir)
	if err != nil {
		return fmt.Errorf("-cache-dir: %w", err)
	}
	c.Sandbox.CacheDir = abs
	return nil
}
