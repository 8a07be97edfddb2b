// Package etcd is the fleet membership of [cluster] kept in etcd:
// executors register under a lease of 3 s and fronts watch the keys, so
// an executor that dies or is cut off from etcd leaves the membership
// within about 3 s.
//
// It is a package of its own because the etcd client and gRPC's
// dependencies are large: a program that uses [cluster.Static] does not
// link them. `bashvisor-fleet` is the command-line program with it.
package etcd

import (
	"time"

	pacluster "github.com/asynkron/protoactor-go/cluster"
	paetcd "github.com/bashvisor/bashvisor/cluster/etcd/internal/provider"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/bashvisor/bashvisor/cluster"
)

// DialTimeout bounds each connection attempt to an etcd endpoint.
const DialTimeout = 5 * time.Second

// Membership is membership through the etcd servers at endpoints
// ("http://host:2379"): executors and fronts of one fleet use the same
// name, which is the protoactor cluster name and the key prefix
// ("/NAME"). With etcd down a running fleet keeps serving (liveness then
// comes from connections and keepalives alone), new executors cannot join,
// and stopping a node does not wait for etcd (see [cluster.Provider]).
func Membership(name string, endpoints ...string) cluster.Membership {
	return cluster.Provider(name, func() (pacluster.ClusterProvider, error) {
		// The client's own logger writes JSON to stderr, retries
		// included: the node logs what matters through slog.
		return paetcd.NewWithConfig("/"+name, clientv3.Config{Endpoints: endpoints, DialTimeout: DialTimeout, Logger: zap.NewNop()})
	})
}
