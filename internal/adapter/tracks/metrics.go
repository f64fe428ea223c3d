package tracks

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/uploadedfile/uploadedfile/service"
)

// metrics are the per-run sweep metrics (no global registry: the caller
// passes its own).
type metrics struct {
	runs     *prometheus.CounterVec
	rows     *prometheus.CounterVec
	duration *prometheus.HistogramVec
	findings *prometheus.CounterVec
	backlog  *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uploadedfile_sweep_runs_total", Help: "Runs of a maintenance track by outcome (ok, error, skipped: another replica held the track).",
		}, []string{"track", "outcome"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uploadedfile_sweep_rows_total", Help: "Rows a maintenance track claimed (examined), finished (done) or released for a retry (failed).",
		}, []string{"track", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "uploadedfile_sweep_duration_seconds", Help: "Duration of maintenance track runs.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 8),
		}, []string{"track"}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uploadedfile_reconcile_findings_total", Help: "Findings of the reconcile track by kind (orphan, staging-leftover, missing, mismatch).",
		}, []string{"kind"}),
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "uploadedfile_sweep_backlog", Help: "Rows each kind of sweep work would take if it ran now, counted when the schedule starts and after each run of the pending or temporary track (capped at 100000: at least that many). A kind that does not fall between runs needs its track more often.",
		}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.rows, m.duration, m.findings, m.backlog)
	}
	return m
}

func (m *metrics) finding(kind service.FindingKind) { m.findings.WithLabelValues(string(kind)).Inc() }

func (m *metrics) run(track, outcome string) { m.runs.WithLabelValues(track, outcome).Inc() }

func (m *metrics) observe(r Result, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.run(r.Track, outcome)
	m.rows.WithLabelValues(r.Track, "examined").Add(float64(r.Examined))
	m.rows.WithLabelValues(r.Track, "done").Add(float64(r.Done))
	m.rows.WithLabelValues(r.Track, "failed").Add(float64(r.Failed))
	m.duration.WithLabelValues(r.Track).Observe(r.Duration.Seconds())
}
