package sandbox

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// TestParseListening: the listening sockets of /proc/net/tcp and tcp6
// tables, their address decoded, the other states and the engine's
// capture slots (127.0.n.1:53, 127.0.n.2) left out.
func TestParseListening(t *testing.T) {
	const tcp = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:0BB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0
   1: 00000000:1435 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1002 1 0000000000000000 100 0 0 10 0
   2: 0100007F:0BB8 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 1003 1 0000000000000000 100 0 0 10 0
   3: 0100007F:0035 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1004 1 0000000000000000 100 0 0 10 0
   4: 0203007F:01BB 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1005 1 0000000000000000 100 0 0 10 0
   5: 0100007F:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 100 0 0 10 0
`
	const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2001 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:2328 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2002 1 0000000000000000 100 0 0 10 0
`
	got := map[uint64]Socket{}
	parseListening(strings.NewReader(tcp), got)
	parseListening(strings.NewReader(tcp6), got)
	want := map[uint64]Socket{
		1001: {Port: 3000, Addr: netip.MustParseAddr("127.0.0.1")},
		1002: {Port: 5173, Addr: netip.MustParseAddr("0.0.0.0")},
		2001: {Port: 8080, Addr: netip.MustParseAddr("::1")},
		2002: {Port: 9000, Addr: netip.MustParseAddr("127.0.0.1")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	s := sortSockets([]Socket{{Port: 8080, Pid: 9}, {Port: 3000, Pid: 7}, {Port: 3000, Pid: 5}})
	if !reflect.DeepEqual(s, []Socket{{Port: 3000, Pid: 5}, {Port: 8080, Pid: 9}}) {
		t.Errorf("sortSockets: %+v", s)
	}
}
