package egress

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// resolverTTL is the time to live of the resolver's answers: short, so
// that a cached answer does not outlive a changed world by much.
const resolverTTL = 5

// Resolve serves DNS on pc (UDP) and l (TCP), either may be nil, until
// [Proxy.Close]: a name the allowlist allows on any port is answered with
// addrs (A with the IPv4 ones, AAAA with the IPv6 ones; an empty answer
// when none is of the family asked), whatever its real addresses; any
// other name gets NXDOMAIN, is reported as a refused Decision with Method
// "DNS" and Port 0, and is counted in [Proxy.Report]. Reverse lookups
// (in-addr.arpa, ip6.arpa) get NXDOMAIN unreported. addrs should route to
// the proxy's carried listeners ([Proxy.Carry]); the proxy resolves the
// real addresses itself when it connects. The answers come from
// github.com/miekg/dns.
func (p *Proxy) Resolve(pc net.PacketConn, l net.Listener, addrs ...netip.Addr) error {
	if pc == nil && l == nil {
		return errors.New("egress: Resolve needs a packet connection or a listener")
	}
	h := &resolver{allow: p.d.allow, report: p.report}
	for _, a := range addrs {
		if a.Unmap().Is4() {
			h.v4 = append(h.v4, a.Unmap())
		} else {
			h.v6 = append(h.v6, a)
		}
	}
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: l, Handler: h}} {
		if srv.PacketConn == nil && srv.Listener == nil {
			continue
		}
		if err := p.startDNS(srv); err != nil {
			return err
		}
	}
	return nil
}

// startDNS runs srv until the proxy closes.
func (p *Proxy) startDNS(srv *dns.Server) error {
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	done := make(chan error, 1)
	p.serving.Add(1)
	go func() {
		defer p.serving.Done()
		done <- srv.ActivateAndServe()
	}()
	select {
	case <-started:
	case err := <-done:
		return fmt.Errorf("egress: resolver: %w", err)
	}
	if !p.add(srv.Shutdown) {
		_ = srv.Shutdown()
		return net.ErrClosed
	}
	return nil
}

// resolver answers A and AAAA queries for allowed names.
type resolver struct {
	allow  *Allowlist
	v4, v6 []netip.Addr
	report func(Decision)
}

func (r *resolver) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	m := new(dns.Msg)
	if len(q.Question) != 1 || q.Opcode != dns.OpcodeQuery {
		m.SetRcode(q, dns.RcodeNotImplemented)
		_ = w.WriteMsg(m)
		return
	}
	m.SetReply(q)
	m.Authoritative, m.RecursionAvailable = true, true
	qq := q.Question[0]
	name := strings.ToLower(strings.TrimSuffix(qq.Name, "."))
	if qq.Qclass != dns.ClassINET || !r.allow.allowsHost(name) {
		m.Rcode = dns.RcodeNameError
		if !strings.HasSuffix(name, ".arpa") && name != "" {
			r.report(Decision{Host: name, Method: "DNS", Reason: "not in the allowlist"})
		}
		_ = w.WriteMsg(m)
		return
	}
	hdr := dns.RR_Header{Name: qq.Name, Class: dns.ClassINET, Ttl: resolverTTL}
	switch qq.Qtype {
	case dns.TypeA:
		hdr.Rrtype = dns.TypeA
		for _, a := range r.v4 {
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
		}
	case dns.TypeAAAA:
		hdr.Rrtype = dns.TypeAAAA
		for _, a := range r.v6 {
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
		}
	}
	_ = w.WriteMsg(m)
}
