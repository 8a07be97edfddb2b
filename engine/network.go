package engine

import (
	"fmt"
	"strings"

	"github.com/bashvisor/bashvisor/internal/egress"
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
