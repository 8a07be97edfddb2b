package sandbox

import (
	"path/filepath"
	"strconv"
)

// environment is what a command's environment gains in the sandbox: its
// scratch directory (a world's /tmp) as TMPDIR, the variables of the build
// and package caches that are not at the user's own paths (bases: name →
// path, the world's caches mounted where the user's tools look; those need
// no variable), pointing into cacheDir (or the scratch directory), and
// with network the proxy's address (when its port is known here and
// Options.ProxyEnv says so: a rootless helper adds it, see handOverProxy). Nothing else: no variable
// changes where a tool writes its output (./target, __pycache__) or what
// it builds.
func environment(scratch, cacheDir string, network bool, proxyPort int, loopbackDirect bool, bases map[string]string) []string {
	cache := cacheDir
	if cache == "" {
		cache = filepath.Join(scratch, ".cache")
	}
	env := []string{
		"TMPDIR=" + scratch,
		"TMP=" + scratch,
		"TEMP=" + scratch,
		"GOTMPDIR=" + scratch,
		"BASHVISOR_SANDBOX=1",
	}
	if len(bases) == 0 {
		// No cache at the user's paths: every tool's cache in ours.
		env = append(env, "XDG_CACHE_HOME="+cache)
	}
	for _, c := range []struct{ name, variable string }{
		{"go-build", "GOCACHE"}, {"npm", "npm_config_cache"}, {"pip", "PIP_CACHE_DIR"},
	} {
		if bases[c.name] == "" {
			env = append(env, c.variable+"="+filepath.Join(cache, c.name))
		}
	}
	if !network {
		// Without network the module caches of the engine's user are read
		// as they are (an offline go build finds its modules there).
		return env
	}
	if bases["go-mod"] == "" {
		// Downloads need writable module caches.
		env = append(env, "GOMODCACHE="+filepath.Join(cache, "go-mod"))
	}
	env = append(env, "CARGO_HOME="+filepath.Join(cache, "cargo"))
	if proxyPort != 0 {
		env = append(env, proxyEnv(proxyPort, loopbackDirect)...)
	}
	return env
}

// proxyEnv points the HTTP clients and package managers at the proxy on
// port. With loopbackDirect (in a world), loopback is reached directly (the
// conversation's own servers); otherwise everything goes through the
// proxy.
func proxyEnv(port int, loopbackDirect bool) []string {
	proxy := "http://127.0.0.1:" + strconv.Itoa(port)
	noProxy := ""
	if loopbackDirect {
		noProxy = "localhost,127.0.0.1,::1"
	}
	return []string{
		"HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy, "http_proxy=" + proxy, "https_proxy=" + proxy,
		"NO_PROXY=" + noProxy, "no_proxy=" + noProxy,
		"npm_config_proxy=" + proxy, "npm_config_https_proxy=" + proxy, "npm_config_noproxy=" + noProxy,
		"PIP_PROXY=" + proxy,
		"CARGO_HTTP_PROXY=" + proxy,
	}
}
