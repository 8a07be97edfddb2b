package mcpserver

import (
	"io"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// MetricsHandler serves the collectors in Prometheus's exposition format,
// for mounting at "/metrics" next to [Handler], behind the same origin
// and authentication checks (opts.Token, Verifier, NoAuth, Scopes,
// ResourceMetadataURL, AllowedOrigins; the other fields do not apply): any
// principal may read them. Like Handler it panics when no authentication
// is configured. Pass an engine's [engine.Engine.Metrics] and whatever else
// the program exports, such as collectors.NewGoCollector(). A program with
// a Prometheus registry of its own registers Engine.Metrics() there
// instead. It panics if two collectors export the same metric.
func MetricsHandler(opts HTTPOptions, collectors ...prometheus.Collector) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors...)
	if opts.Token == "" && opts.Verifier == nil && !opts.NoAuth {
		panic("mcpserver.MetricsHandler: no authentication configured: set HTTPOptions.Token, Verifier, or NoAuth")
	}
	h := newAuthenticator(opts, promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn)}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !originAllowed(r, opts.AllowedOrigins) {
			w.Header().Set("Connection", "close")
			http.Error(w, "Forbidden: origin not allowed", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
