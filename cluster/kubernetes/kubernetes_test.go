package kubernetes

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"
	"k8s.io/client-go/rest"

	"context"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/k8s"
	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
	"github.com/bashvisor/bashvisor/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// client-go's watch and HTTP/2 connections, and protoactor's
		// throttles, wind down after the test on their own timers.
		goleak.IgnoreAnyFunction("k8s.io/apimachinery/pkg/watch.(*StreamWatcher).receive"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewThrottle.func1.1"),
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).StartGossiping.NewThrottle.func3.1"),
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/cluster.(*Gossiper).gossipLoop"),
	)
}

// fakeAPI is a Kubernetes API server for one pod that records the RBAC
// verb of every request.
type fakeAPI struct {
	mu    sync.Mutex
	verbs map[string]bool
	pod   map[string]any
	done  chan struct{} // closed at the end: ends the watches
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, _ := strings.CutPrefix(r.URL.Path, "/api/v1/")
	parts := strings.Split(rest, "/") // [namespaces NS] pods [NAME]
	named := parts[len(parts)-1] != "pods"
	verb := map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}[r.Method]
	switch {
	case verb != "":
	case r.URL.Query().Get("watch") != "":
		verb = "watch"
	case named:
		verb = "get"
	default:
		verb = "list"
	}
	f.mu.Lock()
	f.verbs[verb] = true
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if verb == "watch" {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select { // no events: the fleet has no other pod
		case <-r.Context().Done():
		case <-f.done:
		}
		return
	}
	_ = json.NewEncoder(w).Encode(f.pod)
}

func (f *fakeAPI) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for v := range f.verbs {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// TestVerbs: an executor with the Kubernetes membership, started and
// stopped against a fake API server, asks for exactly Verbs on pods (the
// Role of deploy/kubernetes grants Verbs; its test checks that).
func TestVerbs(t *testing.T) {
	host, _ := os.Hostname()
	api := &fakeAPI{verbs: map[string]bool{}, done: make(chan struct{}), pod: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": host, "namespace": "default", "labels": map[string]string{"app": "bashvisor-executor"}},
	}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	defer close(api.done)
	cfg := engine.DefaultConfig()
	cfg.Cgroups.Off = true
	x, err := cluster.NewExecutor(cfg, cluster.ExecutorOptions{
		Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler),
		Membership: membership("bvtest", func() (*rest.Config, error) { return &rest.Config{Host: srv.URL}, nil }, inNamespace("default")),
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return len(api.seen()) >= 3 }, "the membership asked the API for %v", testenv.Lazy(func() string { return strings.Join(api.seen(), ",") }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := x.Stop(ctx); err != nil { // deregistering: get and patch again
		t.Error(err)
	}
	if got, want := api.seen(), slices.Sorted(slices.Values(Verbs)); !slices.Equal(got, want) {
		t.Errorf("the membership used the verbs %v on pods; Verbs says %v", got, want)
	}
}

// inNamespace sets the provider's namespace, which in a pod comes from
// the service account's files (absent here). The provider has no option
// for it: the test sets its unexported field.
func inNamespace(ns string) k8s.Option {
	return func(p *k8s.Provider) {
		f := reflect.ValueOf(p).Elem().FieldByName("namespace")
		reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetString(ns)
	}
}
