// Package kubernetes is the fleet membership of [cluster] kept by the
// Kubernetes API: each executor labels its own pod and fronts watch the
// pods by label, so an executor whose pod ends leaves the membership.
//
// It is a package of its own because the Kubernetes client is large (it
// roughly doubles the size and start-up time of a program that links it):
// a program that uses [cluster.Static] does not link it. `bashvisor-fleet`
// is the command-line program with it; deploy/kubernetes holds manifests.
package kubernetes

import (
	pacluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/k8s"
	"k8s.io/client-go/rest"

	"github.com/bashvisor/bashvisor/cluster"
)

// Verbs are what the pod's service account must be allowed on pods in its
// namespace: the membership reads its own pod, labels it (a JSON patch)
// and watches the fleet's pods by label (deploy/kubernetes grants exactly
// these; the test of this package records the requests of a running
// executor and front to check the list).
var Verbs = []string{"get", "patch", "watch"}

// Membership is membership through the Kubernetes API of the cluster the
// process runs in (in-cluster configuration), for fleets named name.
// Executors must set [cluster.ExecutorOptions.AdvertisedHost] to their pod
// IP: the provider otherwise advertises the listen address (0.0.0.0).
func Membership(name string) cluster.Membership {
	return membership(name, rest.InClusterConfig)
}

// membership is Membership with the API server's configuration from
// config (the tests' fake API server) and provider options.
func membership(name string, config func() (*rest.Config, error), opts ...k8s.Option) cluster.Membership {
	return cluster.Provider(name, func() (pacluster.ClusterProvider, error) {
		c, err := config()
		if err != nil {
			return nil, err
		}
		return k8s.NewWithConfig(c, opts...)
	})
}
