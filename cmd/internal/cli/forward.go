package cli

import (
	"errors"
	"flag"
	"net/http"
)

// forwardUsage is the -forward flag's usage line.
const forwardUsage = "-http with -sandbox: offer the tool bash_forward, which gives the user a URL of this server " +
	"(http://ADDR/forward/CONVERSATION/PORT/, behind the same authentication) for a server a conversation runs on its sandbox's localhost"

// defineForward defines -forward.
func (f *mcpFlags) defineForward(fs *flag.FlagSet) {
	fs.BoolVar(&f.forward, "forward", false, forwardUsage)
}

// checkForward validates -forward: it needs -http (the URLs are paths of
// its port), the sandbox (without it, servers listen on the host's own
// localhost) and a local engine (a fleet front has no conversations'
// networks).
func (f *mcpFlags) checkForward() error {
	switch {
	case !f.forward:
		return nil
	case f.httpAddr == "":
		return errors.New("-forward needs -http (its URLs are paths of the HTTP port)")
	case !f.sbx.On():
		return errors.New("-forward needs -sandbox: without it the commands' servers are on this host's localhost already")
	case f.fleet.on():
		return errors.New("-forward needs a local engine (not -executors or -cluster)")
	}
	return nil
}

// handleForward mounts h (mcpserver.Handler) at /forward/ too, with -forward.
func (f *mcpFlags) handleForward(mux *http.ServeMux, h http.Handler) {
	if f.forward {
		mux.Handle("/forward/", h)
	}
}
