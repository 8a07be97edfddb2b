package cluster

import (
	"reflect"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/engine"
)

// A call's sandbox and limits cross the wire unchanged: an executor never
// runs a command with less confinement than its front was asked for.
func TestToolContextRoundTrip(t *testing.T) {
	allow := []string{"npm", "127.0.0.1:8080", "*.example.com"}
	in := engine.ToolContext{
		WorkingDir: "/w", ConversationID: "c", Env: map[string]string{"A": "1"}, Approved: true, CallID: "id",
		Sandbox: engine.Sandbox{Profile: engine.WorkspaceWrite, Writable: []string{"/extra"}, Network: allow},
		Limits:  &config.Limits{Memory: 1 << 30, CPUTime: 90 * time.Second, Processes: 64},
	}
	out, err := decodeTC(encodeTC(in, "id"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
	if out, err := decodeTC(encodeTC(engine.ToolContext{WorkingDir: "/w"}, "")); err != nil || out.Sandbox.On() || out.Limits != nil {
		t.Fatalf("no sandbox, no limits: %+v %v", out, err)
	}
	// An allowlist that does not parse crosses unchanged: the executor's
	// engine refuses the call (engine's TestBadNetworkAllowlist).
	bad := encodeTC(engine.ToolContext{}, "")
	bad.AllowNet = []string{"http://not a host"}
	if out, err := decodeTC(bad); err != nil || !reflect.DeepEqual(out.Sandbox.Network, bad.AllowNet) {
		t.Fatalf("bad allowlist: %+v %v", out.Sandbox.Network, err)
	}
}
