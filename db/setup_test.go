// Package db_test tests the SQL in db/queries (compiled by sqlc into this package, db) against
// a real PostgreSQL: every transition, every guard, every scope predicate,
// concurrent claimers, and the query plans on a large table.
package db_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// Durations the service uses; the SQL takes them as parameters.
const (
	activationLease = 15 * time.Minute
	deletionLease   = 5 * time.Minute
	retryBackoff    = time.Minute
	clockSkew       = 15 * time.Minute
	completionLease = 2 * time.Minute
	uploadTTL       = 10 * time.Minute
	cleanupLease    = uploadTTL + time.Hour
	maxExtraData    = 64 << 10 // service.MaxExtraDataBytes
)

// t0 is the pinned "now" of the tests: every query takes the time as a
// parameter, so the tests never depend on the wall clock.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type bundle struct {
	ctx  context.Context
	pool *pgxpool.Pool
	q    *db.Queries
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return &bundle{ctx: context.Background(), pool: pgtest.New(t), q: db.New()}
}

func ptr[T any](v T) *T { return &v }

func at(d time.Duration) *time.Time { return ptr(t0.Add(d)) }

// owner describes who a fixture row belongs to.
type owner struct {
	Tenant     string
	Department *string
	User       string
}

var alice = owner{Tenant: "acme", Department: ptr("sales"), User: "alice"}

// fileOpts shapes a fixture row.
type fileOpts struct {
	Owner     owner
	Temporary bool
	Now       time.Time // defaults to t0
}

func (o fileOpts) now() *time.Time {
	if o.Now.IsZero() {
		return ptr(t0)
	}
	return ptr(o.Now)
}

func (o fileOpts) owner() owner {
	if o.Owner.Tenant == "" {
		return alice
	}
	return o.Owner
}

// hidden inserts a buffer upload that has not been activated yet.
func (b *bundle) hidden(t *testing.T, o fileOpts) db.UploadedFile {
	t.Helper()
	row, err := asFileCall(insertHidden, b.ctx, b.pool, newHiddenParams(o))
	require.NoError(t, err)
	return row
}

// newHiddenParams are a new buffer upload's, under an id of its own.
func newHiddenParams(o fileOpts) db.FileInsertHiddenParams {
	ow := o.owner()
	id := uuid.New()
	return db.FileInsertHiddenParams{
		ID:              id,
		TenantCode:      ow.Tenant,
		DepartmentCode:  ow.Department,
		UserID:          ow.User,
		Key:             "core/" + ow.Tenant + "/" + id.String() + ".pdf",
		CDN:             ptr("uploaded-file/" + id.String()),
		OriginalName:    "report.pdf",
		SizeBytes:       42,
		ContentType:     "application/pdf",
		Visibility:      "private",
		Disposition:     "attachment",
		IsTemporary:     o.Temporary,
		ExtraData:       json.RawMessage(`{"a":1}`),
		Now:             o.now(),
		ActivationLease: activationLease,
	}
}

// ready inserts a buffer upload and activates it.
func (b *bundle) ready(t *testing.T, o fileOpts) db.UploadedFile {
	t.Helper()
	h := b.hidden(t, o)
	row, err := asFile(activateUpload(b.ctx, b.pool, db.FileActivateUploadParams{
		ID: h.ID, UploadMarker: *h.UploadPendingAt, Checksum: ptr("sha256:x"), Now: o.now(),
	}))
	require.NoError(t, err)
	return row
}

// pending inserts an initiated direct upload.
func (b *bundle) pending(t *testing.T, o fileOpts) db.UploadedFile {
	t.Helper()
	row, err := asFileCall(b.q.FileInsertPending, b.ctx, b.pool, newPendingParams(o))
	require.NoError(t, err)
	return row
}

// newPendingParams are a new direct upload's, under an id of its own.
func newPendingParams(o fileOpts) db.FileInsertPendingParams {
	ow := o.owner()
	id := uuid.New()
	return db.FileInsertPendingParams{
		ID:             id,
		TenantCode:     ow.Tenant,
		DepartmentCode: ow.Department,
		UserID:         ow.User,
		Key:            "core/" + ow.Tenant + "/" + id.String() + ".docx",
		PendingKey:     ptr("core/" + ow.Tenant + "/staging/" + id.String()),
		OriginalName:   "plan.docx",
		SizeBytes:      1234,
		ContentType:    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
		Visibility:     "private",
		Disposition:    "attachment",
		IsTemporary:    o.Temporary,
		Checksum:       ptr("sha256:abc"),
		Now:            o.now(),
		UploadTTL:      uploadTTL,
		CleanupLease:   cleanupLease,
	}
}

// completing inserts a direct upload and claims its completion at t0.
func (b *bundle) completing(t *testing.T, o fileOpts) db.UploadedFile {
	t.Helper()
	p := b.pending(t, o)
	row, err := b.q.FileClaimCompletion(b.ctx, b.pool, db.FileClaimCompletionParams{
		ID: p.ID, TenantCode: p.TenantCode, ETag: ptr(`"v1"`), CompletionLease: completionLease, Now: o.now(),
	})
	require.NoError(t, err)
	return row
}

// get reads a row's raw state, whatever it is.
func (b *bundle) get(t *testing.T, id uuid.UUID) db.UploadedFile {
	t.Helper()
	rows, err := b.pool.Query(b.ctx, "SELECT * FROM uploaded_file WHERE id = $1", id)
	require.NoError(t, err)
	f, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[db.UploadedFile])
	require.NoError(t, err)
	return f
}

// requireNoRows asserts that a CAS matched nothing.
func requireNoRows(t *testing.T, err error, msgAndArgs ...any) {
	t.Helper()
	require.ErrorIs(t, err, pgx.ErrNoRows, msgAndArgs...)
}

// exec runs raw SQL for a state no query produces directly (e.g. forcing a
// marker into the past).
func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(b.ctx, sql, args...)
	require.NoError(t, err)
}

// rollbackTx runs fn in a transaction that is always rolled back, so a
// mutating query can be tried against many scopes on the same fixture.
func (b *bundle) rollbackTx(t *testing.T, fn func(tx pgx.Tx) error) error {
	t.Helper()
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(b.ctx)
	return fn(tx)
}

var errNotFound = errors.New("not found")

// found maps a query result to found / not found / failure.
func found(err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, pgx.ErrNoRows), errors.Is(err, errNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("query failed: %w", err)
	}
}

// changedRow is a row type of a transition query that also writes its
// event: the fields of db.UploadedFile under a type of its own.
type changedRow interface {
	db.FileActivateUploadRow | db.FileSettleFailedUploadRow | db.FileClaimAbortRow | db.FileClaimDeletionRow |
		db.FileClaimDeletionByReferencesRow | db.FileSettleDeletionRow | db.FileFailCompletionRow |
		db.FileFinalizeCompletionRow | db.DeletionClaimExpiredTombstonesRow | db.FileClaimExpiredDirectUploadsRow |
		db.FileClaimExpiredTemporaryRow | db.FileClaimUnusedBeforeRow | db.FileRestoreUploadForCleanupRow |
		db.FileRetireTombstoneRow | db.FileInsertHiddenRow | db.FileInsertPendingRow
}

// asFile converts a transition query's result to the model.
func asFile[R changedRow](r R, err error) (db.UploadedFile, error) { return db.UploadedFile(r), err }

// asFiles converts a transition query's results to the model.
func asFiles[R changedRow](rows []R, err error) ([]db.UploadedFile, error) {
	out := make([]db.UploadedFile, len(rows))
	for i, r := range rows {
		out[i] = db.UploadedFile(r)
	}
	return out, err
}

// asFileCall calls a transition query and converts its row to the model.
func asFileCall[P any, R changedRow](q func(context.Context, db.DBTX, P) (R, error), ctx context.Context, conn db.DBTX, p P) (db.UploadedFile, error) {
	return asFile(q(ctx, conn, p))
}

// insertHidden runs FileInsertHidden (a :batchone query, batched by the
// service under load) for one upload.
func insertHidden(ctx context.Context, conn db.DBTX, p db.FileInsertHiddenParams) (db.FileInsertHiddenRow, error) {
	return db.New().InsertHiddenAlone(ctx, conn, p)
}

// activateUpload runs FileActivateUpload (a :batchone query) for one upload.
func activateUpload(ctx context.Context, conn db.DBTX, p db.FileActivateUploadParams) (db.FileActivateUploadRow, error) {
	return db.New().ActivateUploadAlone(ctx, conn, p)
}
