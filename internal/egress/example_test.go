package egress_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/bashvisor/bashvisor/internal/egress"
)

// A world gives its commands a proxy, a resolver that answers allowed
// names with the address its carried listeners hold, and a carried
// listener per allowed port; the report says what was refused.
func Example_world() {
	allow, _ := egress.ParseAllowlist([]string{"registry.npmjs.org"})
	l, _ := net.Listen("tcp", "127.0.0.1:0") // in the world: its namespace's proxy port
	p := egress.Start(l, egress.Policy{Allow: allow})
	defer p.Close()

	capture := netip.MustParseAddr("127.0.0.2") // where the world's clients land
	for _, port := range allow.Ports() {
		cl, err := net.Listen("tcp", net.JoinHostPort(capture.String(), fmt.Sprint(port)))
		if err != nil {
			continue // in the world: listen in its namespace, where the ports are free
		}
		_ = p.Carry(cl, port)
	}
	pc, _ := net.ListenPacket("udp", "127.0.0.1:0") // in the world: 127.0.0.1:53, in resolv.conf
	_ = p.Resolve(pc, nil, capture)

	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return net.Dial("udp", pc.LocalAddr().String())
	}}
	addrs, _ := r.LookupHost(context.Background(), "registry.npmjs.org.")
	fmt.Println(addrs)
	_, err := r.LookupHost(context.Background(), "example.com.")
	fmt.Println(err.(*net.DNSError).IsNotFound)
	fmt.Println(p.Report())
	// Output:
	// [127.0.0.2]
	// true
	// [network: refused: example.com]
}
