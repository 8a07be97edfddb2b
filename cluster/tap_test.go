package cluster_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// rawCodec sends a byte slice as a message as it is.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (rawCodec) Unmarshal([]byte, any) error   { return nil }
func (rawCodec) Name() string                  { return "proto" }

// peakKiB is the peak resident memory (VmHWM) of process pid.
func peakKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.Fields(rest)[0])
			return n
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestNoTokenNoMessageRead: a peer without the token is refused before
// the executor reads its message. Nodes take messages up to 2 GiB − 1;
// gRPC reads a unary request whole before any interceptor runs, so a
// 300 MiB request without the token grew the executor's peak memory by
// 325 MiB (review7) until the token was checked at the stream's headers.
func TestNoTokenNoMessageRead(t *testing.T) {
	if inFreshProcess(t) {
		return
	}
	ex := startExecutor(t, execSpec{name: "exec-1", token: "s3cret-token", mark: t.Name()})
	pid := ex.cmd.Process.Pid
	before := peakKiB(t, pid)
	cc, err := grpc.Dial(ex.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallSendMsgSize(1<<30)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out []byte
	err = cc.Invoke(ctx, "/remote.Remoting/ListProcesses", make([]byte, 300<<20), &out)
	after := peakKiB(t, pid)
	t.Logf("300 MiB without the token: %v; the executor's peak memory %d -> %d KiB", err, before, after)
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("got %v, want Unauthenticated", err)
	}
	if after-before > 100<<10 {
		t.Errorf("the executor's peak memory grew by %d KiB for a peer without the token", after-before)
	}
}
