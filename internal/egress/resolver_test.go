package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/testenv"
	"github.com/miekg/dns"
)

// resolverFor serves a proxy with the allowlist and its resolver on
// loopback (UDP and TCP), answering allowed names with addrs.
func resolverFor(t *testing.T, addrs []netip.Addr, entries ...string) (*Proxy, *net.Resolver, string, *decisions) {
	t.Helper()
	ds := &decisions{}
	p, _ := startProxy(t, Policy{Allow: allow(t, entries...), Log: ds.add})
	// The same port for UDP and TCP, as on :53: a free UDP port's TCP
	// twin may be taken by another test's connection, so try a few.
	var (
		pc  net.PacketConn
		l   net.Listener
		err error
	)
	for range 20 {
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if l, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Resolve(pc, l, addrs...); err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	return p, r, addr, ds
}

// TestResolverAnswersAllowedNamesOnly: with a real client, allowed names
// (exact, wildcard, any port) resolve to the given addresses only, other
// names get NXDOMAIN over UDP and TCP, and the refused names are in the
// report and the decisions, reverse lookups aside.
func TestResolverAnswersAllowedNamesOnly(t *testing.T) {
	to4, to6 := netip.MustParseAddr("127.0.0.7"), netip.MustParseAddr("fd00::7")
	p, r, addr, ds := resolverFor(t, []netip.Addr{to4, to6}, "registry.npmjs.org", "*.example.com", "git.example.org:8443", "pypi")
	ctx := context.Background()
	for _, name := range []string{"registry.npmjs.org.", "a.b.example.com.", "GIT.example.org.", "files.pythonhosted.org."} {
		got, err := r.LookupNetIP(ctx, "ip", name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		slices.SortFunc(got, netip.Addr.Compare)
		if !slices.Equal(got, []netip.Addr{to4, to6}) {
			t.Errorf("%s: %v, want %v and %v", name, got, to4, to6)
		}
	}
	refused := []string{"example.com.", "evil.org.", "registry.npmjs.org.evil.org."}
	for _, name := range refused {
		_, err := r.LookupNetIP(ctx, "ip4", name)
		var de *net.DNSError
		if !errors.As(err, &de) || !de.IsNotFound {
			t.Errorf("%s: %v, want NXDOMAIN", name, err)
		}
	}
	if _, err := r.LookupAddr(ctx, "8.8.8.8"); err == nil {
		t.Error("a reverse lookup was answered")
	}
	// TCP, as a client falls back to after a truncated answer.
	for name, want := range map[string]int{"registry.npmjs.org.": dns.RcodeSuccess, "tcp-refused.org.": dns.RcodeNameError} {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		in, _, err := (&dns.Client{Net: "tcp"}).Exchange(m, addr)
		if err != nil {
			t.Fatal(err)
		}
		if in.Rcode != want || want == dns.RcodeSuccess && (len(in.Answer) != 1 || in.Answer[0].(*dns.A).A.String() != to4.String()) {
			t.Errorf("TCP %s: %v", name, in)
		}
	}
	refused = append(refused, "tcp-refused.org.")
	var denied []string
	for _, f := range p.Report() {
		if f.Port != 0 || f.BytesIn+f.BytesOut != 0 {
			t.Errorf("flow %+v", f)
		}
		denied = append(denied, f.Host+".")
	}
	slices.Sort(denied)
	slices.Sort(refused)
	if !slices.Equal(denied, refused) {
		t.Errorf("refused %v, want %v", denied, refused)
	}
	for _, d := range ds.all() {
		if d.Allowed || d.Method != "DNS" {
			t.Errorf("decision %+v", d)
		}
	}
	if s := p.Report().String(); !strings.Contains(s, "refused: evil.org, example.com") && !strings.HasPrefix(s, "[network: refused: ") {
		t.Errorf("summary %q", s)
	}
}

// TestResolverWithDig asks with dig when it is installed.
func TestResolverWithDig(t *testing.T) {
	dig := testenv.NeedsTool(t, "dig")[0]
	_, _, addr, _ := resolverFor(t, []netip.Addr{netip.MustParseAddr("127.0.0.7")}, "registry.npmjs.org")
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command(dig, "@"+host, "-p", port, "+short", "registry.npmjs.org", "A").Output()
	if err != nil || strings.TrimSpace(string(out)) != "127.0.0.7" {
		t.Errorf("dig allowed: %q %v", out, err)
	}
	out, _ = exec.Command(dig, "@"+host, "-p", port, "evil.org", "A").Output()
	if !strings.Contains(string(out), "NXDOMAIN") {
		t.Errorf("dig refused: %q", out)
	}
}

// TestResolverWithGetent: glibc's own resolver (getent, as a program in
// the world would call it) with /etc/resolv.conf masked, in a mount
// namespace of its own, to point at the resolver: an allowed name
// resolves to the given address, a denied one is not found and is
// reported.
func TestResolverWithGetent(t *testing.T) {
	tools := testenv.NeedsTool(t, "getent", "unshare")
	const at = "127.77.0.53" // resolv.conf knows only port 53
	pc, err := net.ListenPacket("udp", at+":53")
	testenv.Need(t, testenv.Namespaces, err)
	l, err := net.Listen("tcp", at+":53")
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	p, _ := startProxy(t, Policy{Allow: allow(t, "registry.npmjs.org")})
	if err := p.Resolve(pc, l, netip.MustParseAddr("127.0.0.7")); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(conf, []byte("nameserver "+at+"\noptions attempts:1 timeout:5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	getent := func(name string) (string, error) {
		out, err := exec.Command(tools[1], "--mount", "--propagation", "private", "sh", "-c",
			`mount --bind "$1" /etc/resolv.conf && exec "$2" ahostsv4 "$3"`, "sh", conf, tools[0], name).CombinedOutput()
		return string(out), err
	}
	out, err := getent("registry.npmjs.org")
	var ee *exec.ExitError
	if errors.As(err, &ee) && strings.Contains(out, "mount") {
		testenv.Need(t, testenv.Namespaces, fmt.Errorf("a mount namespace: %s", out))
	}
	if err != nil || !strings.HasPrefix(out, "127.0.0.7 ") {
		t.Errorf("allowed: %q %v", out, err)
	}
	out, err = getent("evil.example.org")
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || out != "" {
		t.Errorf("denied: %q %v, want exit 2 (not found)", out, err)
	}
	if s := p.Report().String(); s != "[network: refused: evil.example.org]" {
		t.Errorf("report %q", s)
	}
}

// TestReportBoundedByDestinations: a command looking up ever new names
// (each refused, each a destination of the report) grows the report to
// flowsMax destinations and one that counts the rest.
func TestReportBoundedByDestinations(t *testing.T) {
	p, _, addr, _ := resolverFor(t, nil, "registry.npmjs.org")
	c := &dns.Client{Net: "udp"}
	extra := 50
	for i := range flowsMax + extra {
		q := new(dns.Msg).SetQuestion(fmt.Sprintf("n%d.evil.org.", i), dns.TypeA)
		m, _, err := c.Exchange(q, addr)
		if err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		if m.Rcode != dns.RcodeNameError {
			t.Fatalf("query %d: rcode %d, want NXDOMAIN", i, m.Rcode)
		}
	}
	r := p.Report()
	if len(r) != flowsMax+1 {
		t.Fatalf("%d destinations in the report, want %d", len(r), flowsMax+1)
	}
	i := slices.IndexFunc(r, func(f Flow) bool { return f.Host == otherHosts })
	if i < 0 || r[i].Denied != extra || r[i].Port != 0 {
		t.Fatalf("no %q flow with %d refusals: %+v", otherHosts, extra, r[len(r)-1])
	}
}
