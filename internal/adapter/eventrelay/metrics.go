package eventrelay

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the relay's Prometheus collectors, labelled by sink.
type metrics struct {
	depth      *prometheus.GaugeVec
	oldest     *prometheus.GaugeVec
	deliveries *prometheus.CounterVec
	failures   *prometheus.CounterVec
	parks      *prometheus.CounterVec
}

// newMetrics registers the relay's collectors with reg.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "uploadedfile_events_outbox_depth", Help: "Events in the outbox after the sink's cursor (not yet delivered).",
		}, []string{"sink"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "uploadedfile_events_oldest_undelivered_seconds", Help: "Age of the oldest event the sink has not been delivered yet (0: none).",
		}, []string{"sink"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uploadedfile_events_delivered_total", Help: "Events acknowledged by the sink (redeliveries included).",
		}, []string{"sink"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uploadedfile_events_delivery_failures_total", Help: "Failed delivery attempts.",
		}, []string{"sink"}),
		parks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uploadedfile_events_parked_total", Help: "Events parked after the sink's last attempt.",
		}, []string{"sink"}),
	}
	reg.MustRegister(m.depth, m.oldest, m.deliveries, m.failures, m.parks)
	return m
}

func (m *metrics) delivered(sink string, n int) {
	if m != nil && n > 0 {
		m.deliveries.WithLabelValues(sink).Add(float64(n))
	}
}

func (m *metrics) failure(sink string) {
	if m != nil {
		m.failures.WithLabelValues(sink).Inc()
	}
}

func (m *metrics) parked(sink string) {
	if m != nil {
		m.parks.WithLabelValues(sink).Inc()
	}
}

func (m *metrics) backlog(sink string, depth int64, oldest, now time.Time) {
	if m == nil {
		return
	}
	m.depth.WithLabelValues(sink).Set(float64(depth))
	age := 0.0
	if depth > 0 {
		age = max(0, now.Sub(oldest).Seconds())
	}
	m.oldest.WithLabelValues(sink).Set(age)
}
