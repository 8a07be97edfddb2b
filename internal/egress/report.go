package egress

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Flow is what one destination saw of a proxy's connections.
type Flow struct {
	// Host is the name (or address) the command asked for, lower case;
	// "(other hosts)" for the destinations beyond the first 1024 (a
	// command looking up random names cannot grow the report without
	// bound).
	Host string
	// Port is the destination port; 0 for a name the resolver refused.
	Port int
	// BytesOut and BytesIn count the bytes the destination acknowledged
	// and sent on the proxy's connections to it, as the kernel counts
	// them (TLS records included; for a brokered host, those of the
	// proxy's own connection). Linux only: elsewhere they stay 0.
	BytesOut, BytesIn int64
	// Denied counts the attempts refused (connections, requests, name
	// lookups).
	Denied int
}

// flowsMax bounds the destinations a proxy counts one by one; the rest
// are counted together under Host otherHosts, Port 0.
const flowsMax = 1024

// otherHosts is the Host of the flow that counts the destinations beyond
// flowsMax.
const otherHosts = "(other hosts)"

// Report is a proxy's flows, the busiest first.
type Report []Flow

// summaryMax caps the length of [Report.String].
const summaryMax = 200

// String is the one-line summary for a command's result, at most about
// 200 characters (a name that would pass the cap is counted in "+N more"
// instead, unless it is the first): "[network: registry.npmjs.org 2.1 MB; refused:
// example.com]", hosts by bytes moved, refused destinations (with the
// port unless it is 80 or 443) by name; "" when there was no network use.
func (r Report) String() string {
	bytes := map[string]int64{}
	var hosts, refused []string
	for _, f := range r {
		if f.BytesIn+f.BytesOut > 0 {
			if _, ok := bytes[f.Host]; !ok {
				hosts = append(hosts, f.Host)
			}
			bytes[f.Host] += f.BytesIn + f.BytesOut
		}
		if f.Denied > 0 {
			name := f.Host
			if f.Port != 0 && f.Port != 80 && f.Port != 443 {
				name = net.JoinHostPort(f.Host, strconv.Itoa(f.Port))
			}
			if !slices.Contains(refused, name) {
				refused = append(refused, name)
			}
		}
	}
	if len(hosts) == 0 && len(refused) == 0 {
		return ""
	}
	slices.SortStableFunc(hosts, func(a, b string) int { return cmp.Compare(bytes[b], bytes[a]) })
	slices.Sort(refused)
	var b strings.Builder
	b.WriteString("[network:")
	list := func(items []string, show func(string) string, budget int) {
		for i, it := range items {
			s := show(it)
			if b.Len()+len(s) > budget && b.Len() > len("[network:") {
				fmt.Fprintf(&b, " +%d more", len(items)-i)
				return
			}
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(" " + s)
		}
	}
	hostBudget := summaryMax
	if len(refused) > 0 {
		hostBudget = summaryMax * 2 / 3 // leave room to name a refusal
	}
	list(hosts, func(h string) string { return h + " " + size(bytes[h]) }, hostBudget)
	if len(refused) > 0 {
		if len(hosts) > 0 {
			b.WriteString(";")
		}
		b.WriteString(" refused:")
		list(refused, func(h string) string { return h }, summaryMax)
	}
	b.WriteString("]")
	return b.String()
}

// size formats n bytes in SI units with one decimal ("2.1 MB").
func size(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTP"[exp])
}

// meter counts a proxy's flows.
type meter struct {
	mu    sync.Mutex
	flows map[flowKey]*counters
	order []flowKey
	live  map[*countedConn]struct{} // open: their bytes are not in flows yet
}

type flowKey struct {
	host string
	port int
}

type counters struct {
	out, in atomic.Int64
	denied  atomic.Int64
}

func (m *meter) get(host string, port int) *counters {
	k := flowKey{strings.ToLower(strings.TrimSuffix(host, ".")), port}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.flows == nil {
		m.flows = map[flowKey]*counters{}
	}
	c, ok := m.flows[k]
	if !ok && len(m.flows) >= flowsMax {
		k = flowKey{otherHosts, 0}
		c, ok = m.flows[k]
	}
	if !ok {
		c = &counters{}
		m.flows[k] = c
		m.order = append(m.order, k)
	}
	return c
}

// decided counts a refusal.
func (m *meter) decided(d Decision) {
	if !d.Allowed {
		m.get(d.Host, d.Port).denied.Add(1)
	}
}

func (m *meter) report() Report {
	m.mu.Lock()
	open := map[*counters][2]int64{}
	for cc := range m.live {
		out, in := sockBytes(cc.TCPConn)
		sum := open[cc.c]
		open[cc.c] = [2]int64{sum[0] + out, sum[1] + in}
	}
	r := make(Report, 0, len(m.order))
	for _, k := range m.order {
		c := m.flows[k]
		r = append(r, Flow{Host: k.host, Port: k.port, BytesOut: c.out.Load() + open[c][0], BytesIn: c.in.Load() + open[c][1], Denied: int(c.denied.Load())})
	}
	m.mu.Unlock()
	slices.SortStableFunc(r, func(a, b Flow) int { return cmp.Compare(b.BytesIn+b.BytesOut, a.BytesIn+a.BytesOut) })
	return r
}

// countedConn is a connection to a destination whose bytes the meter
// counts. It is the *net.TCPConn itself to the copying code (half-close,
// and the kernel's zero-copy splice between two TCP connections, stay):
// the bytes are the kernel's count (TCP_INFO: acknowledged by the
// destination, received from it), read when a report is made and when
// the connection closes.
type countedConn struct {
	*net.TCPConn
	m    *meter
	c    *counters
	once sync.Once
}

func (m *meter) counted(c *net.TCPConn, host string, port int) *countedConn {
	cc := &countedConn{TCPConn: c, m: m, c: m.get(host, port)}
	m.mu.Lock()
	if m.live == nil {
		m.live = map[*countedConn]struct{}{}
	}
	m.live[cc] = struct{}{}
	m.mu.Unlock()
	return cc
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		out, in := sockBytes(c.TCPConn)
		c.m.mu.Lock()
		delete(c.m.live, c)
		c.c.out.Add(out)
		c.c.in.Add(in)
		c.m.mu.Unlock()
	})
	return c.TCPConn.Close()
}
