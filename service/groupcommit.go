package service

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/uploadedfile/uploadedfile/db"
)

// newUploadStatements is the group commit of the buffer upload's two
// statements (db.UploadStatements) over the service's database, with its
// tracer and metrics.
func (s *Service) newUploadStatements() *db.UploadStatements {
	var tracer trace.Tracer
	if s.tracer != nil {
		tracer = s.tracer.Tracer("github.com/uploadedfile/uploadedfile/service")
	}
	return db.NewUploadStatements(s.db, db.GroupCommitConfig{Tracer: tracer, Observe: s.groupCommitMetrics()})
}

// groupCommitMetrics registers the committers' metrics (WithMetrics) and
// returns each statement's observer; without a registry, none.
func (s *Service) groupCommitMetrics() func(statement string) func(int, bool) {
	if s.metrics == nil {
		return func(string) func(int, bool) { return nil }
	}
	size := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "uploadedfile_group_commit_statements",
		Help:    "Statements per transaction of the buffer upload's group commit, by statement (1: an upload's statement run alone).",
		Buckets: []float64{1, 2, 4, 8, 16, 32},
	}, []string{"statement"})
	failed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "uploadedfile_group_commit_failed_total",
		Help: "Batches of the buffer upload's group commit that failed as a whole, by statement; their uploads ran their statements alone.",
	}, []string{"statement"})
	s.metrics.MustRegister(size, failed)
	return func(statement string) func(int, bool) {
		sizes, failures := size.WithLabelValues(statement), failed.WithLabelValues(statement)
		return func(n int, batchFailed bool) {
			sizes.Observe(float64(n))
			if batchFailed {
				failures.Inc()
			}
		}
	}
}
