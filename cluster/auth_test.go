package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/engine"
)

// TestNoTokenOffLoopback: neither an executor nor a front listens off
// loopback without a shared token.
func TestNoTokenOffLoopback(t *testing.T) {
	if _, err := cluster.NewExecutor(testConfig(), cluster.ExecutorOptions{Listen: "0.0.0.0:0"}); err == nil || !strings.Contains(err.Error(), "without a shared token") {
		t.Errorf("executor on 0.0.0.0 without a token: %v", err)
	}
	if _, err := cluster.NewClient(cluster.ClientOptions{Membership: cluster.Static("127.0.0.1:1"), Listen: "0.0.0.0:0"}); err == nil || !strings.Contains(err.Error(), "without a shared token") {
		t.Errorf("front on 0.0.0.0 without a token: %v", err)
	}
}

// TestToken: a front with the fleet's token runs calls; a front with
// another token is refused at the connection and never sees the executor
// ready.
func TestToken(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	ex := startExecutor(t, execSpec{name: "exec-1", token: "s3cret-token", mark: t.Name()})
	bad := newClient(t, cluster.ClientOptions{Membership: cluster.Static(ex.addr), Token: "wrong-token"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	if err := bad.WaitExecutors(ctx, 1); err == nil {
		t.Error("a front with the wrong token saw the executor ready")
	}
	cancel()
	if r := bad.Run(context.Background(), engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "x"}, engine.Input{Command: "echo no"}); !errors.Is(r.Err, cluster.ErrNoExecutor) {
		t.Errorf("call through a front with the wrong token: %s %q", r.Status, r.Output)
	}
	shutdown(t, bad)
}

// TestTokenAccepted: the same executor serves a front with its token.
func TestTokenAccepted(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	ex := startExecutor(t, execSpec{name: "exec-1", token: "s3cret-token", mark: t.Name()})
	c := newClient(t, cluster.ClientOptions{Membership: cluster.Static(ex.addr), Token: "s3cret-token"})
	defer shutdown(t, c)
	waitReady(t, c, 1)
	if r := c.Run(context.Background(), engine.ToolContext{WorkingDir: t.TempDir(), ConversationID: "x"}, engine.Input{Command: "echo yes"}); r.Output != "yes\n" {
		t.Errorf("call with the right token: %s %q", r.Status, r.Output)
	}
}
