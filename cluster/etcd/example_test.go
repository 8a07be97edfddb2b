package etcd_test

import (
	"fmt"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/cluster/etcd"
)

// Executors and fronts of one fleet name the same etcd servers and fleet
// name; the etcd client connects when the node starts.
func ExampleMembership() {
	m := etcd.Membership("bashvisor", "http://10.0.0.5:2379", "http://10.0.0.6:2379")
	front := cluster.ClientOptions{Membership: m, Token: "the fleet's shared secret"}
	executor := cluster.ExecutorOptions{Listen: "10.0.0.7:7001", Membership: m, Token: front.Token}
	_ = executor // cluster.NewExecutor(engine.DefaultConfig(), executor) on each executor
	fmt.Println(etcd.DialTimeout)
	// Output: 5s
}
