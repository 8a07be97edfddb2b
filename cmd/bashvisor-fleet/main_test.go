package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/bashvisor/bashvisor/cmd/internal/cli"
)

// A protoactor member that fails to start (not in a pod) is stopped, but
// its gossip throttle ends on its own timer, after the test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1"))
}

// TestMemberships: bashvisor-fleet takes -cluster etcd:URL,… and k8s; a
// bad argument is a usage error, and outside a Kubernetes pod the k8s
// membership fails to start with the client's reason.
func TestMemberships(t *testing.T) {
	p := &cli.Program{Name: "bashvisor-fleet", Commands: cli.Standard(), Memberships: memberships}
	for _, c := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"executor", "-cluster", "etcd:"}, 64, "needs the etcd endpoints"},
		{[]string{"executor", "-cluster", "k8s:default"}, 64, "takes no argument"},
		{[]string{"executor", "-cluster", "zookeeper:x"}, 64, "-cluster must be one of automanaged:HOSTS, etcd, k8s"},
		{[]string{"executor", "-listen", "127.0.0.1:0", "-cluster", "k8s"}, 1, "in-cluster configuration"},
	} {
		var out, errb bytes.Buffer
		if code := p.Main(c.args, &out, &errb); code != c.code || !strings.Contains(errb.String(), c.err) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", c.args, code, errb.String(), c.code, c.err)
		}
	}
	var out bytes.Buffer
	p.Main([]string{"executor", "-h"}, &out, &out)
	if !strings.Contains(out.String(), "etcd:URL,…, k8s") {
		t.Errorf("executor -h does not name etcd and k8s:\n%s", out.String())
	}
}
