package kubernetes_test

import (
	"fmt"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/cluster/kubernetes"
)

// An executor in a pod joins the fleet named "bashvisor" through the
// Kubernetes API; its pod IP is what fronts reach it at. Its service
// account needs these verbs on pods.
func ExampleMembership() {
	opts := cluster.ExecutorOptions{
		Listen:         "0.0.0.0:7001",
		AdvertisedHost: "10.1.2.3:7001", // $(POD_IP):7001
		Token:          "the fleet's shared secret",
		Membership:     kubernetes.Membership("bashvisor"),
	}
	_ = opts // cluster.NewExecutor(engine.DefaultConfig(), opts) in the pod
	fmt.Println(kubernetes.Verbs)
	// Output: [get patch watch]
}
