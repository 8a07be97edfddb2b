package egress

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Presets are the allowlist entries that stand for a package ecosystem's
// hosts (HTTP and HTTPS: ports 80 and 443): the index and the host its
// files come from (PyPI's files.pythonhosted.org, GitHub's release and
// archive storage objects.githubusercontent.com and codeload.github.com,
// the crates' static.crates.io, Go's checksum database sum.golang.org),
// and for playwright the CDNs its browsers download from.
var Presets = map[string][]string{
	"npm":        {"registry.npmjs.org", "registry.yarnpkg.com"},
	"pypi":       {"pypi.org", "files.pythonhosted.org"},
	"go":         {"proxy.golang.org", "sum.golang.org", "storage.googleapis.com"},
	"crates":     {"crates.io", "index.crates.io", "static.crates.io", "static.rust-lang.org"},
	"debian":     {"deb.debian.org", "security.debian.org"},
	"github":     {"github.com", "api.github.com", "codeload.github.com", "objects.githubusercontent.com", "raw.githubusercontent.com"},
	"playwright": {"cdn.playwright.dev", "playwright.azureedge.net", "playwright.download.prss.microsoft.com"},
}

// Allowlist says which destinations a sandboxed command may reach. Its
// entries are domains ("registry.npmjs.org" allows ports 80 and 443),
// wildcards ("*.example.com": any subdomain, not example.com itself),
// host:port pairs ("example.com:8443", "127.0.0.1:8080", "[::1]:9000"), and
// the names of Presets. Matching is case-insensitive. A name that resolves
// to a loopback, private, link-local or metadata address is refused unless
// an entry names that host and port exactly (tests that stand in a local
// server for a registry need it). A nil *Allowlist allows nothing.
type Allowlist struct {
	entries []entry
	source  []string
}

type entry struct {
	host     string // lower case; for wildcards the suffix with its leading dot
	wildcard bool
	port     int // 0: 80 and 443
}

// ParseAllowlist parses allowlist entries.
func ParseAllowlist(entries []string) (*Allowlist, error) {
	a := &Allowlist{}
	for _, raw := range entries {
		e := strings.ToLower(strings.TrimSpace(raw))
		if e == "" {
			continue
		}
		a.source = append(a.source, e)
		if hosts, ok := Presets[e]; ok {
			for _, h := range hosts {
				a.entries = append(a.entries, entry{host: h})
			}
			continue
		}
		ent := entry{host: e}
		if h, p, err := net.SplitHostPort(e); err == nil {
			port, err := strconv.Atoi(p)
			if err != nil || port <= 0 || port > 65535 {
				return nil, fmt.Errorf("allowlist entry %q: bad port", raw)
			}
			ent.host, ent.port = h, port
		}
		ent.host = strings.TrimSuffix(strings.TrimPrefix(ent.host, "["), "]") // a bare IPv6 address
		if rest, ok := strings.CutPrefix(ent.host, "*."); ok {
			ent.host, ent.wildcard = "."+rest, true
		}
		if ent.host == "" || ent.host == "." || strings.ContainsAny(ent.host, "/ *@") {
			return nil, fmt.Errorf("allowlist entry %q: want a domain, *.domain, host:port or one of %s", raw, strings.Join(presetNames(), ", "))
		}
		a.entries = append(a.entries, ent)
	}
	return a, nil
}

func presetNames() []string {
	var names []string
	for n := range Presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Covers reports whether the allowlist already allows all that raw
// (one allowlist entry, as ParseAllowlist takes it) would: a preset's
// hosts, a domain on ports 80 and 443, a host:port, or a wildcard that
// one of its own wildcards covers. An entry that does not parse is not
// covered.
func (a *Allowlist) Covers(raw string) bool {
	one, err := ParseAllowlist([]string{raw})
	if a == nil || err != nil || one.Empty() {
		return false
	}
	for _, e := range one.entries {
		covered := false
		switch {
		case e.wildcard:
			covered = slices.ContainsFunc(a.entries, func(o entry) bool {
				return o.wildcard && o.port == e.port && strings.HasSuffix(e.host, o.host)
			})
		case e.port != 0:
			covered = a.allowsName(e.host, e.port)
		default:
			covered = a.allowsName(e.host, 80) && a.allowsName(e.host, 443)
		}
		if !covered {
			return false
		}
	}
	return true
}

// Empty reports whether the allowlist allows nothing.
func (a *Allowlist) Empty() bool { return a == nil || len(a.entries) == 0 }

// Entries returns the entries as given (lower case, trimmed), for
// ParseAllowlist to make the same allowlist again.
func (a *Allowlist) Entries() []string {
	if a == nil {
		return nil
	}
	return slices.Clone(a.source)
}

// String lists the entries as given, comma-separated.
func (a *Allowlist) String() string {
	if a == nil {
		return ""
	}
	return strings.Join(a.source, ", ")
}

// NamesLoopback reports whether an entry names a loopback host and port
// ("localhost:8080", "127.0.0.1:5000", "[::1]:9000"): a server of the
// machine the proxy runs on, reachable only through the proxy.
func (a *Allowlist) NamesLoopback() bool {
	if a == nil {
		return false
	}
	for _, e := range a.entries {
		if e.port == 0 || e.wildcard {
			continue
		}
		if ip, err := netip.ParseAddr(e.host); e.host == "localhost" || err == nil && ip.Unmap().IsLoopback() {
			return true
		}
	}
	return false
}

// Ports lists, in order, the ports the allowlist allows some host on:
// 80 and 443 for any domain or wildcard entry, and each host:port
// entry's port. A world carries connections ([Proxy.Carry]) on these.
func (a *Allowlist) Ports() []int {
	var ports []int
	if a == nil {
		return nil
	}
	for _, e := range a.entries {
		if e.port == 0 {
			ports = append(ports, 80, 443)
		} else {
			ports = append(ports, e.port)
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// allowsName reports whether an entry allows host:port by name.
func (a *Allowlist) allowsName(host string, port int) bool {
	if a == nil {
		return false
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, e := range a.entries {
		if e.port == 0 && port != 80 && port != 443 || e.port != 0 && e.port != port {
			continue
		}
		if e.wildcard && strings.HasSuffix(host, e.host) || !e.wildcard && host == e.host {
			return true
		}
	}
	return false
}

// allowsLoopback reports whether an entry names host (or the address it
// resolved to) and port exactly, which lets a special address through.
func (a *Allowlist) allowsLoopback(host string, addr netip.Addr, port int) bool {
	if a == nil {
		return false
	}
	host = strings.ToLower(host)
	for _, e := range a.entries {
		if e.port != port || e.wildcard {
			continue
		}
		if e.host == host {
			return true
		}
		if ea, err := netip.ParseAddr(e.host); err == nil && ea.Unmap() == addr {
			return true
		}
	}
	return false
}

// allowsHost reports whether an entry allows host by name, on any port.
func (a *Allowlist) allowsHost(host string) bool {
	if a == nil {
		return false
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, e := range a.entries {
		if e.wildcard && strings.HasSuffix(host, e.host) || !e.wildcard && host == e.host {
			return true
		}
	}
	return false
}
