package egress

import (
	"cmp"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Flow is what one destination saw of a proxy's connections.
type Flow struct {
	// Host is the name (or address) the command asked for, lower case.
	Host string
	// Port is the destination port; 0 for a name the resolver refused.
	Port int
	// BytesOut and BytesIn count the bytes written to and read from the
	// destination's connections (TLS records included; for a brokered
	// host, those of the proxy's own connection to it).
	BytesOut, BytesIn int64
	// Denied counts the attempts refused (connections, requests, name
	// lookups).
	Denied int
}

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
	r := make(Report, 0, len(m.order))
	for _, k := range m.order {
		c := m.flows[k]
		r = append(r, Flow{Host: k.host, Port: k.port, BytesOut: c.out.Load(), BytesIn: c.in.Load(), Denied: int(c.denied.Load())})
	}
	m.mu.Unlock()
	slices.SortStableFunc(r, func(a, b Flow) int { return cmp.Compare(b.BytesIn+b.BytesOut, a.BytesIn+a.BytesOut) })
	return r
}

// countedConn counts the bytes of a connection to a destination as they
// pass, keeping the *net.TCPConn's half-close. Its ReadFrom and WriteTo
// copy through Read and Write so that a long tunnel is counted while it
// runs (the TCPConn's own would count only when the copy ends; no
// zero-copy splice is lost, the other side being a wrapped conn).
type countedConn struct {
	*net.TCPConn
	c *counters
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	c.c.in.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.TCPConn.Write(p)
	c.c.out.Add(int64(n))
	return n, err
}

func (c *countedConn) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(struct{ io.Writer }{c}, r)
}

func (c *countedConn) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, struct{ io.Reader }{c})
}
