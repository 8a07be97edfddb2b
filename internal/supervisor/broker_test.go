package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bashvisor/bashvisor/internal/actors"
	"github.com/bashvisor/bashvisor/internal/egress"
	"github.com/bashvisor/bashvisor/internal/jobs"
)

// TestConvBrokerHidesEverywhere: a secret file granted by a relative
// path is covered by its placeholder (the mask is the absolute path), and
// a secret inside any value — the policy's environment ("URL=https://x:
// SECRET@h/", "AUTH=Bearer SECRET"), the engine's extra variables, the
// caller's overrides — reaches the job as its placeholder.
func TestConvBrokerHidesEverywhere(t *testing.T) {
	const fileSecret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	const envSecret = "sk-abcdefghijklmnopqrstuvwxyz012345"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tok"), []byte(fileSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	t.Setenv("BVTEST_BROKER_SECRET", envSecret)
	b, err := egress.NewBroker([]string{"github.com=file:tok", "api.example.com=env:BVTEST_BROKER_SECRET"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"URL=https://x:" + envSecret + "@h/", "AUTH=Bearer " + envSecret, "GH=" + fileSecret, "PLAIN=x"}
	cb, err := newConvBroker(b, filepath.Join(t.TempDir(), "b"), base)
	if err != nil {
		t.Fatal(err)
	}
	g := cb.b.Grants()
	if len(cb.files) != 1 || cb.files[0].Path != filepath.Join(dir, "tok") {
		t.Errorf("file masks %+v", cb.files)
	}
	spec := &actors.Spec{Request: jobs.Request{
		ExtraEnv: []string{"HOOK=curl -u u:" + fileSecret},
		Env:      map[string]string{"OVERRIDE": "token " + envSecret},
		Sandbox:  &jobs.Profile{},
	}}
	cb.apply(spec)
	env := strings.Join(append(spec.ExtraEnv, "OVERRIDE="+spec.Env["OVERRIDE"]), "\n")
	for _, want := range []string{"URL=https://x:" + g[1].Placeholder + "@h/", "AUTH=Bearer " + g[1].Placeholder, "GH=" + g[0].Placeholder,
		"BVTEST_BROKER_SECRET=" + g[1].Placeholder, "HOOK=curl -u u:" + g[0].Placeholder, "OVERRIDE=token " + g[1].Placeholder} {
		if !strings.Contains(env, want+"\n") && !strings.HasSuffix(env, want) {
			t.Errorf("missing %q in\n%s", want, env)
		}
	}
	if strings.Contains(env, fileSecret) || strings.Contains(env, envSecret) || strings.Contains(env, "PLAIN") {
		t.Errorf("job environment:\n%s", env)
	}
}
