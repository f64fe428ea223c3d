package db

import (
	"bytes"
	"cmp"
	"context"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/uploadedfile/uploadedfile/db/internal/groupcommit"
	"github.com/uploadedfile/uploadedfile/db/internal/pgbatch"
)

// uploadBatchMax bounds the buffer uploads whose statement shares one
// transaction.
const uploadBatchMax = 32

// UploadStatements are the buffer upload's two statements, FileInsertHidden
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
type UploadStatements struct {
	insert   *groupcommit.Committer[FileInsertHiddenParams, FileInsertHiddenRow]
	activate *groupcommit.Committer[FileActivateUploadParams, FileActivateUploadRow]
}

// GroupCommitConfig is what the group commit reports to.
type GroupCommitConfig struct {
	// Tracer gets a span per shared transaction; nil: none.
	Tracer trace.Tracer
	// Observe returns, for a statement's name, what is told each
	// transaction's size and whether it failed as a whole; nil: nothing.
	Observe func(statement string) func(statements int, failed bool)
}

// NewUploadStatements is the group commit of the buffer upload's two
// statements over c.
func NewUploadStatements(c DBTX, cfg GroupCommitConfig) *UploadStatements {
	observe := cfg.Observe
	if observe == nil {
		observe = func(string) func(int, bool) { return nil }
	}
	q := New()
	return &UploadStatements{
		// The usage rows each insert locks, tenant ('') then owner, then
		// its key's guard row, in the same key order across the batch (by
		// bytes, as COLLATE "C"): no two batches (nor a batch and any other
		// statement, all of which lock usage rows in key order) wait on
		// each other in a cycle.
		insert: committer(c, q, "FileInsertHidden", insertHiddenBatch, func(a, b FileInsertHiddenParams) int {
			return cmp.Or(strings.Compare(a.TenantCode, b.TenantCode), strings.Compare(a.UserID, b.UserID),
				strings.Compare(deref(a.IdempotencyKey), deref(b.IdempotencyKey)))
		}, cfg.Tracer, observe),
		// The file rows the activations lock, in id order.
		activate: committer(c, q, "FileActivateUpload", activateUploadBatch, func(a, b FileActivateUploadParams) int {
			return bytes.Compare(a.ID[:], b.ID[:])
		}, cfg.Tracer, observe),
	}
}

// InsertHidden runs FileInsertHidden for p, in a batch with the uploads
// queued beside it: its row, its own error (a refused quota), or the
// batch's.
func (u *UploadStatements) InsertHidden(ctx context.Context, p FileInsertHiddenParams) (FileInsertHiddenRow, error) {
	return u.insert.Do(ctx, p)
}

// ActivateUpload runs FileActivateUpload for p, in a batch with the
// uploads queued beside it.
func (u *UploadStatements) ActivateUpload(ctx context.Context, p FileActivateUploadParams) (FileActivateUploadRow, error) {
	return u.activate.Do(ctx, p)
}

// Queued is how many uploads wait for a batch of their insert and of their
// activation.
func (u *UploadStatements) Queued() (inserts, activations int) {
	return u.insert.Queued(), u.activate.Queued()
}

// committer is the group commit of the :batchone query that batch sends
// (insertHiddenBatch, activateUploadBatch), its members in compare order.
func committer[P, R any](c DBTX, q *Queries, name string, batch func(context.Context, *Queries, []P) func(pgbatch.DBTX) pgbatch.Results[R],
	compare func(a, b P) int, tracer trace.Tracer, observe func(string) func(int, bool)) *groupcommit.Committer[P, R] {
	return groupcommit.New(groupcommit.Config[P, R]{
		Name: name,
		Alone: func(ctx context.Context, p P) (R, error) {
			return pgbatch.One(c, batch(ctx, q, []P{p}))
		},
		Together: func(ctx context.Context, ps []P) ([]R, []error, error) {
			return pgbatch.Read(c, batch(ctx, q, ps), len(ps))
		},
		Compare:  compare,
		MaxBatch: uploadBatchMax,
		Tracer:   tracer,
		Observe:  observe(name),
	})
}

// InsertHiddenAlone runs FileInsertHidden for one upload in a batch of its
// own, as UploadStatements does for an upload alone.
func (q *Queries) InsertHiddenAlone(ctx context.Context, c DBTX, p FileInsertHiddenParams) (FileInsertHiddenRow, error) {
	return pgbatch.One(c, insertHiddenBatch(ctx, q, []FileInsertHiddenParams{p}))
}

// ActivateUploadAlone runs FileActivateUpload for one upload in a batch of
// its own.
func (q *Queries) ActivateUploadAlone(ctx context.Context, c DBTX, p FileActivateUploadParams) (FileActivateUploadRow, error) {
	return pgbatch.One(c, activateUploadBatch(ctx, q, []FileActivateUploadParams{p}))
}

// insertHiddenBatch is q's FileInsertHidden for ps, as pgbatch sends it.
func insertHiddenBatch(ctx context.Context, q *Queries, ps []FileInsertHiddenParams) func(pgbatch.DBTX) pgbatch.Results[FileInsertHiddenRow] {
	return func(conn pgbatch.DBTX) pgbatch.Results[FileInsertHiddenRow] {
		return q.FileInsertHidden(ctx, conn, ps)
	}
}

// activateUploadBatch is q's FileActivateUpload for ps, as pgbatch sends it.
func activateUploadBatch(ctx context.Context, q *Queries, ps []FileActivateUploadParams) func(pgbatch.DBTX) pgbatch.Results[FileActivateUploadRow] {
	return func(conn pgbatch.DBTX) pgbatch.Results[FileActivateUploadRow] {
		return q.FileActivateUpload(ctx, conn, ps)
	}
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
