package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/bashvisor/bashvisor/cluster"
	"github.com/bashvisor/bashvisor/cluster/clusterpb"
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

// TestForwardStreamNeedsToken: the executor serves forwarded connections
// on gRPC streams of their own beside protoactor's, on the same port:
// without the token, or with another, a stream is refused before the
// executor reads its request; with it, a request for a conversation the
// executor does not hold is answered not held; other methods are refused.
func TestForwardStreamNeedsToken(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	ex := startExecutor(t, execSpec{name: "exec-1", token: "s3cret-token", mark: t.Name()})
	open := func(method string, opts ...grpc.DialOption) (*clusterpb.QueryReply, error) {
		cc, err := grpc.Dial(ex.addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, method)
		if err != nil {
			return nil, err
		}
		// A stream the server ended fails SendMsg with io.EOF; RecvMsg
		// then says why.
		_ = s.SendMsg(&clusterpb.Query{Op: "forward", Port: 3000, Tc: &clusterpb.ToolContext{ConversationId: "nowhere"}})
		r := new(clusterpb.QueryReply)
		return r, s.RecvMsg(r)
	}
	const method = "/bashvisor.cluster.Forward/Open"
	if _, err := open(method); status.Code(err) != codes.Unauthenticated {
		t.Errorf("a forward stream without the token: %v", err)
	}
	if _, err := open(method, grpc.WithPerRPCCredentials(bearer("wrong-token"))); status.Code(err) != codes.Unauthenticated {
		t.Errorf("a forward stream with another token: %v", err)
	}
	r, err := open(method, grpc.WithPerRPCCredentials(bearer("s3cret-token")))
	if err != nil || !r.NotHeld {
		t.Errorf("a forward stream with the token, to a conversation held nowhere: %v, %v", r, err)
	}
	if _, err := open("/bashvisor.cluster.Forward/Other", grpc.WithPerRPCCredentials(bearer("s3cret-token"))); status.Code(err) != codes.Unimplemented {
		t.Errorf("another method with the token: %v", err)
	}
}

// bearer sends a token as the fleet's nodes do, without TLS.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }
