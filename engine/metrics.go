package engine

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the engine's Prometheus metrics (see [Engine.Metrics]).
type metrics struct {
	commands *prometheus.CounterVec   // by status
	duration *prometheus.HistogramVec // by mode
	queued   prometheus.Histogram
	bytes    prometheus.Counter
	denials  prometheus.Counter
	network  *prometheus.CounterVec // egress bytes by direction
	refused  prometheus.Counter     // egress attempts refused
	load     []prometheus.Collector // gauges read from the supervisor at scrape time
}

func newMetrics(e *Engine) *metrics {
	m := &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bashvisor_commands_total",
			Help: "Tool calls answered, by result status (ok, failed, timed_out, cancelled, blocked, denied, needs_approval, error, started).",
		}, []string{"status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "bashvisor_command_duration_seconds",
			Help:    "Wall time of the commands that ran, from their start, by mode (background: the start only).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900},
		}, []string{"mode"}),
		queued: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "bashvisor_queue_wait_seconds",
			Help:    "Time calls waited for a slot before their command started (admission control).",
			Buckets: []float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bashvisor_output_bytes_total",
			Help: "Bytes of output foreground commands produced.",
		}),
		denials: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bashvisor_sandbox_denials_total",
			Help: "Sandboxed commands whose result ends with a sandbox note: a write, a network call or a destination the sandbox refused.",
		}),
		network: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bashvisor_network_bytes_total",
			Help: "Bytes sandboxed foreground commands moved through their egress proxy, by direction (out: acknowledged by the destination; in: received from it).",
		}, []string{"direction"}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bashvisor_network_refused_total",
			Help: "Egress attempts (connections, requests, name lookups) refused to sandboxed foreground commands.",
		}),
	}
	gauge := func(name, help string, f func(Load) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(f(e.Load())) })
	}
	m.load = []prometheus.Collector{
		gauge("bashvisor_commands_running", "Foreground commands running now.", func(l Load) int { return l.Running }),
		gauge("bashvisor_jobs_running", "Background jobs running now.", func(l Load) int { return l.Jobs }),
		gauge("bashvisor_calls_queued", "Calls waiting to run now.", func(l Load) int { return l.Queued }),
		gauge("bashvisor_busy_cpus", "CPUs wanted by the commands measured busy now (admission control).", func(l Load) int { return l.BusyCPUs }),
	}
	return m
}

// observe records one call's result.
func (m *metrics) observe(tc ToolContext, in Input, r Result) {
	m.commands.WithLabelValues(string(r.Status)).Inc()
	if r.PID == 0 { // never ran
		return
	}
	mode := in.Mode
	if mode == "" {
		mode = ModeDefault
	}
	m.duration.WithLabelValues(string(mode)).Observe(float64(r.DurationMS) / 1000)
	m.queued.Observe(float64(r.QueuedMS) / 1000)
	m.bytes.Add(float64(r.OutputBytes))
	if r.denied {
		m.denials.Inc()
	}
	for _, f := range r.Network {
		m.network.WithLabelValues("out").Add(float64(f.BytesOut))
		m.network.WithLabelValues("in").Add(float64(f.BytesIn))
		m.refused.Add(float64(f.Denied))
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return append([]prometheus.Collector{m.commands, m.duration, m.queued, m.bytes, m.denials, m.network, m.refused}, m.load...)
}

// Metrics returns the engine's Prometheus metrics as one collector, to
// register with a prometheus.Registry and serve from the embedding
// program's /metrics: bashvisor_commands_total{status},
// bashvisor_command_duration_seconds{mode}, bashvisor_queue_wait_seconds,
// bashvisor_output_bytes_total, bashvisor_sandbox_denials_total,
// bashvisor_network_bytes_total{direction}, bashvisor_network_refused_total, and the
// gauges bashvisor_commands_running, bashvisor_jobs_running and
// bashvisor_calls_queued (read when scraped).
func (e *Engine) Metrics() prometheus.Collector { return e.metrics }
