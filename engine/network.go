package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bashvisor/bashvisor/internal/egress"
	"github.com/bashvisor/bashvisor/safety"
)

// proxyNames are the proxy variables whose presence in the engine's
// environment makes the engine export its own (see Config.ProxyEnv).
var proxyNames = []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NPM_CONFIG_PROXY", "NPM_CONFIG_HTTPS_PROXY", "PIP_PROXY", "CARGO_HTTP_PROXY"}

// proxyEnv reports whether sandboxed commands get the proxy variables
// even where their clients are carried (Config.ProxyEnv).
func (e *Engine) proxyEnv() bool {
	if e.cfg.ProxyEnv {
		return true
	}
	for _, kv := range e.cfg.Env.Environ {
		name, value, _ := strings.Cut(kv, "=")
		for _, n := range proxyNames {
			if strings.EqualFold(name, n) && value != "" {
				return true
			}
		}
	}
	return false
}

// newBroker reads the secrets of Config.Broker (nil: none).
func newBroker(cfg Config) (*egress.Broker, error) {
	if len(cfg.Broker) == 0 {
		return nil, nil
	}
	b, err := egress.NewBroker(cfg.Broker, cfg.BrokerLookup)
	if err != nil {
		return nil, fmt.Errorf("bashvisor: Config.Broker: %w", err)
	}
	if cfg.BrokerRoots != nil {
		b.VerifyWith(cfg.BrokerRoots)
	}
	return b, nil
}

// askNetwork lets a call reach the hosts in.Network asks for beyond its
// allowlist only with a person's approval (see Input.Network): without
// it the result needs approval and names them; with it tc's allowlist
// gains them. It runs before the gate, which then judges the command with
// the hosts: a command the agent may run unasked without network (an ask
// contained in the sandbox) is no longer contained with them, so the one
// question names both the hosts and what the command would otherwise have
// been asked about, and a single approval covers what the person was
// shown. A command the gate blocks or denies is refused as such.
func (e *Engine) askNetwork(res Result, tc *ToolContext, in Input, a safety.Analysis) (Result, bool) {
	if len(in.Network) == 0 {
		return res, true
	}
	if !tc.Sandbox.On() {
		return errorResult(res, fmt.Errorf("%w: network hosts need a sandbox profile: unrestricted commands have the host's network", ErrBadInput)), false
	}
	have, err := egress.ParseAllowlist(tc.Sandbox.Network)
	if err != nil {
		return errorResult(res, fmt.Errorf("%w: network allowlist: %w", ErrBadInput, err)), false
	}
	asked, err := egress.ParseAllowlist(in.Network)
	if err != nil {
		return errorResult(res, fmt.Errorf("%w: network: %w", ErrBadInput, err)), false
	}
	var missing []string
	for _, entry := range asked.Entries() {
		if !have.Covers(entry) && !slices.Contains(missing, entry) {
			missing = append(missing, entry)
		}
	}
	if len(missing) == 0 {
		return res, true
	}
	withHosts := *tc
	withHosts.Sandbox.Network = append(slices.Clip(tc.Sandbox.Network), missing...)
	if tc.Approved {
		*tc = withHosts
		return res, true
	}
	res.Display = a.Display
	why := "network access to " + strings.Join(missing, ", ") + ", which the sandbox's allowlist does not name"
	if r, _, ok := e.admit(res, withHosts, in, a); !ok {
		if r.Status != StatusNeedsApproval {
			return r, false // blocked or denied whatever the network
		}
		why += "; and, with that network, " + strings.TrimPrefix(r.Err.Error(), ErrNeedsApproval.Error()+": ")
	}
	res.Status, res.Err = StatusNeedsApproval, fmt.Errorf("%w: %s", ErrNeedsApproval, why)
	res.Output = approvalText(why)
	e.log.Info("network asked", "hosts", missing, "conversation", tc.ConversationID)
	return res, false
}
