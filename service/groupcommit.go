package service

import (
	"bytes"
	"cmp"
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/uploadedfile/uploadedfile/gen/db"
	"github.com/uploadedfile/uploadedfile/internal/groupcommit"
	"github.com/uploadedfile/uploadedfile/internal/pgbatch"
)

// uploadBatchMax bounds the buffer uploads whose statement shares one
// transaction.
const uploadBatchMax = 32

// uploadStatements are the buffer upload's two statements, FileInsertHidden
// and FileActivateUpload, each committed in groups while uploads run
// concurrently: k uploads' inserts (or activations) in one pipelined
// transaction instead of k (docs/decisions.md, "The buffer upload's two
// statements are committed in groups under load"). An upload alone runs its
// statement alone, as before.
//
// Both statements are safe to run a second time after a batch whose
// outcome is unknown: the insert's id is unique (a second run fails and the
// hidden row, with no object, is the stale-upload sweep's), and the
// activation names its exact upload marker (a second run matches zero rows,
// and the settled cleanup then reads that the activation committed).
type uploadStatements struct {
	insert   *groupcommit.Committer[db.FileInsertHiddenParams, db.FileInsertHiddenRow]
	activate *groupcommit.Committer[db.FileActivateUploadParams, db.FileActivateUploadRow]
}

// newUploadStatements builds the two committers over the service's
// database, with its tracer and metrics.
func (s *Service) newUploadStatements() uploadStatements {
	var tracer trace.Tracer
	if s.tracer != nil {
		tracer = s.tracer.Tracer("github.com/uploadedfile/uploadedfile/service")
	}
	observe := s.groupCommitMetrics()
	return uploadStatements{
		// The usage rows each insert locks, tenant ('') then owner, in the
		// same key order across the batch: no two batches (nor a batch and
		// any other statement, all of which lock usage rows in key order)
		// wait on each other in a cycle.
		insert: committer(s, "FileInsertHidden", insertHiddenBatch, func(a, b db.FileInsertHiddenParams) int {
			return cmp.Or(strings.Compare(a.TenantCode, b.TenantCode), strings.Compare(a.UserID, b.UserID))
		}, tracer, observe),
		// The file rows the activations lock, in id order.
		activate: committer(s, "FileActivateUpload", activateUploadBatch, func(a, b db.FileActivateUploadParams) int {
			return bytes.Compare(a.ID[:], b.ID[:])
		}, tracer, observe),
	}
}

// committer is the group commit of the :batchone query that batch sends
// (insertHiddenBatch, activateUploadBatch), its members in compare order.
func committer[P, R any](s *Service, name string, batch func(context.Context, *db.Queries, []P) func(pgbatch.DBTX) pgbatch.Results[R],
	compare func(a, b P) int, tracer trace.Tracer, observe func(string) func(int, bool)) *groupcommit.Committer[P, R] {
	return groupcommit.New(groupcommit.Config[P, R]{
		Name: name,
		Alone: func(ctx context.Context, p P) (R, error) {
			return pgbatch.One(s.db, batch(ctx, s.q, []P{p}))
		},
		Together: func(ctx context.Context, ps []P) ([]R, []error, error) {
			return pgbatch.Read(s.db, batch(ctx, s.q, ps), len(ps))
		},
		Compare:  compare,
		MaxBatch: uploadBatchMax,
		Tracer:   tracer,
		Observe:  observe(name),
	})
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

// insertHiddenBatch is q's FileInsertHidden for ps, as pgbatch sends it.
func insertHiddenBatch(ctx context.Context, q *db.Queries, ps []db.FileInsertHiddenParams) func(pgbatch.DBTX) pgbatch.Results[db.FileInsertHiddenRow] {
	return func(conn pgbatch.DBTX) pgbatch.Results[db.FileInsertHiddenRow] {
		return q.FileInsertHidden(ctx, conn, ps)
	}
}

// activateUploadBatch is q's FileActivateUpload for ps, as pgbatch sends it.
func activateUploadBatch(ctx context.Context, q *db.Queries, ps []db.FileActivateUploadParams) func(pgbatch.DBTX) pgbatch.Results[db.FileActivateUploadRow] {
	return func(conn pgbatch.DBTX) pgbatch.Results[db.FileActivateUploadRow] {
		return q.FileActivateUpload(ctx, conn, ps)
	}
}
