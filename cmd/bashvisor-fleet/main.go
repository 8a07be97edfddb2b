// Command bashvisor-fleet is bashvisor with the etcd and Kubernetes
// memberships: `executor -cluster etcd:URL,…` and `-cluster k8s`, and the
// same for `mcp`. Their clients (the Kubernetes client-go, the etcd
// client) make it about three times the size of bashvisor and slower to
// start, so they are left out of bashvisor; use this program on executors
// and fronts that find each other through etcd or Kubernetes
// (deploy/kubernetes runs it).
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/cluster/etcd"
	"github.com/bashvisor/bashvisor/cluster/kubernetes"
	"github.com/bashvisor/bashvisor/cmd/internal/cli"
	"github.com/bashvisor/bashvisor/engine"
)

func main() {
	engine.SandboxMain() // the restricted-mode helper: confines itself and execs bash
	p := &cli.Program{
		Name: "bashvisor-fleet",
		Summary: "bashvisor-fleet is bashvisor with the etcd and Kubernetes memberships for\n" +
			"executors and fronts (-cluster etcd:URL,… and -cluster k8s).",
		Commands:    cli.Standard(),
		Memberships: memberships,
	}
	os.Exit(p.Main(os.Args[1:], os.Stdout, os.Stderr))
}

// memberships are the -cluster kinds this program adds.
var memberships = map[string]cli.Membership{
	"etcd": func(arg string, _ int) (cluster.Membership, error) {
		if arg == "" {
			return nil, fmt.Errorf("-cluster etcd:URL,… needs the etcd endpoints")
		}
		return etcd.Membership(cli.ClusterName, strings.Split(arg, ",")...), nil
	},
	"k8s": func(arg string, _ int) (cluster.Membership, error) {
		if arg != "" {
			return nil, fmt.Errorf("-cluster k8s takes no argument (the pod's namespace and service account are used), not %q", arg)
		}
		return kubernetes.Membership(cli.ClusterName), nil
	},
}
