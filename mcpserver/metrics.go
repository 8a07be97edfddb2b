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
// and token checks (opts.Token, opts.AllowedOrigins; the other fields do
// not apply). Pass an engine's [engine.Engine.Metrics] and whatever else
// the program exports, such as collectors.NewGoCollector(). A program with
// a Prometheus registry of its own registers Engine.Metrics() there
// instead. It panics if two collectors export the same metric.
func MetricsHandler(opts HTTPOptions, collectors ...prometheus.Collector) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors...)
	g := newGuard(opts)
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn)})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.allow(w, r) {
			h.ServeHTTP(w, r)
		}
	})
}
