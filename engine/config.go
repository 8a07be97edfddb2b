package engine

import (
	"context"
	"crypto/x509"
	"io"
	"log/slog"
	"time"

	"github.com/bashvisor/bashvisor/config"
	"github.com/bashvisor/bashvisor/internal/supervisor"
	"github.com/bashvisor/bashvisor/safety"
)

// SandboxMain must be the first statement of main in a program that uses
// config.Sandbox.Helper: when the engine re-executes the program as the
// sandbox helper, SandboxMain confines the process and execs the command
// (it never returns); otherwise it returns at once.
func SandboxMain() { supervisor.SandboxMain() }

// OnTimeout says what happens to a foreground command at its timeout.
type OnTimeout string

// The choices of Config.OnTimeout.
const (
	OnTimeoutKill       OnTimeout = "kill"
	OnTimeoutBackground OnTimeout = "background"
)

// Config configures an Engine. The zero value of every field means its
// default; see [DefaultConfig]. The groups (Lifecycle, Env, Output,
// Cgroups, Limits, Sandbox, Admission) are package config's: the engine
// passes each down whole to the layers that run commands.
type Config struct {
	// Timeout bounds a default-mode command (default 30s).
	Timeout time.Duration
	// SlowTimeout bounds a slow-mode command (default 15m).
	SlowTimeout time.Duration
	// BackgroundLifetime bounds a background job (default 24h). Negative
	// means no limit.
	BackgroundLifetime time.Duration
	// OnTimeout says what happens to a default or slow command that reaches
	// its timeout: OnTimeoutKill (the default) ends it; OnTimeoutBackground
	// moves it to the background instead, as a job of its conversation
	// (see Input.YieldMS), unless the conversation or the engine already
	// runs as many background jobs as Admission allows (then it is ended,
	// and the result says why).
	OnTimeout OnTimeout
	// Lifecycle says how a command's processes are ended: the grace between
	// SIGTERM and SIGKILL (default 2s), the bounded waits after SIGKILL
	// (default 15s) and for the output pipe after the shell exited
	// (default 250ms), and whether a foreground shell's leftovers keep
	// running.
	Lifecycle config.Lifecycle
	// Env is the environment policy: which of the engine's variables a
	// command sees (default config.InheritSafe: all but secrets), and
	// which values are redacted from its output.
	Env config.Env
	// Output says how much output is returned (default 131072 bytes, cut
	// in the middle) and how much of a truncated output is kept in a
	// full-output file (default 64 MiB, the newest 32 files).
	Output config.Output
	// Cgroups says where the engine makes a cgroup per command (default:
	// under its own cgroup, where it can).
	Cgroups config.Cgroups
	// Limits are every command's resource limits (a call can override
	// them with ToolContext.Limits). Zero fields mean the defaults: memory
	// half of the physical memory, at most 16 GiB; 4096 processes and
	// threads; no CPU time limit. Negative ones mean no limit. The
	// defaults let `go build`, `npm install`, `pytest` and `cargo build`
	// of mid-size projects and heavily threaded programs run; they stop
	// memory and fork bombs.
	Limits config.Limits
	// Sandbox configures sandboxed commands: their resource limits, the
	// helper, where their scratch directories and build caches live.
	Sandbox config.Sandbox
	// Admission says when a command may start: by what its running
	// commands use (the CPUs, measured per command; the host's memory and
	// processes), fairly between principals and between conversations,
	// with count caps as backstops; a call that cannot start yet waits,
	// its timeout not yet started, and a call over a queue cap, or a
	// background job over a jobs cap, fails with ErrBusy. Zero fields take
	// the defaults; config.Admission documents the model.
	Admission config.Admission

	// OutputDir holds background output files and spooled outputs (default
	// a new directory under os.TempDir, removed at Shutdown unless
	// KeepFiles).
	OutputDir string
	// KeepFiles keeps OutputDir's files at Shutdown.
	KeepFiles bool
	// LeaveJobsRunning leaves background jobs running at Shutdown. When
	// secret values are redacted (see config.Env.Strip), a job's output
	// reaches its file through the engine; at Shutdown the engine hands
	// the job's output pipe to a `cat` process of its own, which appends
	// the rest of the output to the file unredacted, until the job closes
	// its output.
	LeaveJobsRunning bool
	// ProgressInterval is the period of ToolContext.Progress calls
	// (default 1s).
	ProgressInterval time.Duration

	// CoAuthor, when set ("Name <email>"), adds a Co-authored-by trailer to
	// real git commit invocations (the git subcommand after its global
	// options), once, without changing anything else. Off by default.
	CoAuthor string
	// Permissions is the permission profile checked after the safety rules
	// (nil: none). See safety.Preset. In workspace-write its asks marked
	// safety.Rule.Contained run contained and what they changed is held
	// for review (see the package doc); its other asks ask first.
	Permissions *safety.Profile
	// Audit receives the audit log: one JSON line per call (nil: none).
	Audit io.Writer
	// Review is the review mode of workspace-write commands when a call
	// gives none (ToolContext.Review): "apply" (the default: what policy
	// allows is applied, the rest is held for review) or "hold" (every
	// change set is held until accepted).
	Review string
	// OnHeld, when set, is offered each change set a foreground
	// workspace-write command leaves held, before Run returns, in the
	// calling goroutine: returning true accepts it (Review), and the
	// result reports it applied; false leaves it held (Held, Review).
	OnHeld func(ctx context.Context, tc ToolContext, held HeldChanges) bool
	// ProxyEnv exports the proxy variables (HTTP_PROXY, HTTPS_PROXY, their
	// lower-case forms, NO_PROXY, the npm, pip and cargo settings) to
	// every sandboxed command with network. By default a command whose
	// conversation's resolver carries its connections (see
	// Sandbox.Network) gets none, because clients work without them and
	// some behave differently with them set; they are still exported to
	// a command that got no resolver (a conversation running many network
	// commands at once), whose allowlist names a loopback server of the
	// host (reachable only through the proxy), and when the engine's own
	// environment holds one of them (which would otherwise send the
	// command's clients to the engine's proxy).
	ProxyEnv bool
	// Broker names secrets the egress proxy puts into sandboxed commands'
	// requests, so that the commands hold only placeholders: each
	// "host=env:NAME" (the engine's environment variable NAME),
	// "host=file:PATH" (the file's content, white space trimmed) or
	// "host=REF" (resolved by BrokerLookup), with "host:port=" for a port
	// other than 443. Secrets are read once, by New, which fails when one
	// is missing or too short (fewer than 8 letters and digits). Each
	// conversation gets its own placeholders (random, of the secret's
	// shape and token prefix) and its own CA; a sandboxed command sees
	// the placeholder in the variable NAME (and any other variable holding
	// the secret) and over the file PATH (a hard link elsewhere is not
	// covered), and, with network, trusts the CA (the system's CA bundle,
	// with the CA added, is mounted over the system's; NODE_EXTRA_CA_CERTS
	// and REQUESTS_CA_BUNDLE name it). For these hosts only, the proxy
	// terminates TLS and puts the secret in place of its placeholder only
	// in Authorization (also inside Basic credentials) and the headers a
	// grant names (",header=NAME" at its end), never in other headers,
	// URLs or bodies; whatever the host sends back (headers, body,
	// trailers) has the secret turned back into the placeholder (a body in
	// an encoding other than gzip, or an upgrade, is refused with 502).
	// The placeholder also replaces the secret inside any value of the
	// command's environment, overrides included; a relative file: PATH is
	// the working directory's. A broker host must also be in the
	// command's allowlist (Sandbox.Network); other hosts stay end-to-end
	// TLS. Unrestricted
	// commands get the engine's environment as the environment policy
	// says, secrets included.
	Broker []string
	// BrokerLookup resolves Broker's references other than env: and file:
	// (the embedding program's secret store), once, in New; nil refuses
	// them.
	BrokerLookup func(ref string) (string, error)
	// BrokerRoots are the roots the proxy verifies broker hosts'
	// certificates against (nil: the system's).
	BrokerRoots *x509.CertPool
	// Logger receives the engine's and protoactor's logs (default: discard).
	// Nothing is ever written to stdout.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults: 30 s default timeout, 15 min slow
// timeout, 24 h background lifetime, 2 s grace, 128 KiB of output cut in
// the middle, full outputs up to 64 MiB kept, memory limit half of the
// physical memory (at most 16 GiB), 4096 processes.
func DefaultConfig() Config {
	return Config{
		Timeout:            30 * time.Second,
		SlowTimeout:        15 * time.Minute,
		BackgroundLifetime: 24 * time.Hour,
		Lifecycle:          config.Lifecycle{Grace: 2 * time.Second, CleanupWait: 15 * time.Second, DrainWait: 250 * time.Millisecond},
		Env:                config.Env{Policy: config.InheritSafe},
		Output:             config.Output{Max: 131072, Truncation: config.TruncateMiddle, SpoolCap: 64 << 20, SpoolKeep: 32, JobFileCap: 64 << 20},
		ProgressInterval:   time.Second,
		Limits:             config.Limits{}.WithDefaults(),
	}
}
