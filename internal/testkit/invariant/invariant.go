// Package invariant checks what the product promises of a settled
// database and store -- after the work stopped and the sweeps ran to their
// end -- and reports every breach instead of stopping at the first:
//
//   - every visible row has its object, holding the row's bytes;
//   - every object in the store is owned by a row (a visible file, an upload
//     tombstone, a variant), so nothing outlives its row;
//   - nothing is left in flight but upload tombstones, and every staging
//     object was swept;
//   - every ready variant is of a visible file and has its object;
//   - no chunk of a resumable upload is left (the chunk sweep removed each);
//   - the usage counters equal the sums over the rows that hold space;
//   - every row has the lifecycle events of what happened to it, in order.
//
// The chaos test (internal/adapter/tracks) and the fleet test
// (cmd/uploadedfile) check their runs with it. It reads every row, so it is
// a test's and an operator's tool on a quiet database, not a query to run
// under traffic.
package invariant

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// Report is what Check saw and every breach it found.
type Report struct {
	Rows, Ready, Deleted, Tombstones, Other int
	Objects, Final, Staging, Variants       int
	UsageRows, Events                       int
	// Visible maps every visible file to its key, for checks of a run's
	// own (what was acknowledged, what the bytes hold).
	Visible map[uuid.UUID]string
	// Violations is one line per breach; empty when every invariant holds.
	Violations []string
}

func (r *Report) breach(format string, args ...any) {
	r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
}

// Summary is one line of counts.
func (r *Report) Summary() string {
	return fmt.Sprintf("%d rows (%d ready, %d deleted, %d tombstones, %d other), %d objects (%d final, %d staging), %d variants, %d usage rows, %d events: %d violations",
		r.Rows, r.Ready, r.Deleted, r.Tombstones, r.Other, r.Objects, r.Final, r.Staging, r.Variants, r.UsageRows, r.Events, len(r.Violations))
}

// Check checks the database behind pool against store, whose every key
// (final and staging namespaces, variants) is keys. Its error is a failure
// to read, not a breach.
func Check(ctx context.Context, pool *pgxpool.Pool, store storage.Store, keys []string) (*Report, error) {
	r := &Report{Visible: map[uuid.UUID]string{}}
	rows, err := pool.Query(ctx, "SELECT * FROM uploaded_file")
	if err != nil {
		return nil, err
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[db.UploadedFile])
	if err != nil {
		return nil, err
	}
	owned := map[string]bool{}
	for _, f := range all {
		if err := r.row(ctx, store, f, owned); err != nil {
			return nil, err
		}
	}
	if err := r.variants(ctx, pool, store, owned); err != nil {
		return nil, err
	}
	if err := r.chunks(ctx, pool, owned); err != nil {
		return nil, err
	}
	for _, key := range keys {
		r.Objects++
		if strings.Contains(key, "/_staging/") {
			r.Staging++
		} else {
			r.Final++
		}
		if !owned[key] {
			r.breach("object %s has no row that owns it", key)
		}
	}
	if r.Other > 0 {
		r.breach("%d rows are still in flight or claimed after settling (only upload tombstones may be)", r.Other)
	}
	if err := r.usage(ctx, pool); err != nil {
		return nil, err
	}
	if err := r.events(ctx, pool, all); err != nil {
		return nil, err
	}
	return r, nil
}

// visible reports whether a row is a file every read answers.
func visible(f db.UploadedFile) bool {
	return f.Status == "ready" && f.UploadPendingAt == nil && f.DeletionPendingAt == nil && f.DeletedAt == nil
}

// row checks one row and records the keys it owns.
func (r *Report) row(ctx context.Context, store storage.Store, f db.UploadedFile, owned map[string]bool) error {
	r.Rows++
	tombstone := f.UploadPendingAt != nil && f.UploadExpiresAt == nil && f.DeletedAt != nil
	switch {
	case visible(f):
		r.Ready++
		r.Visible[f.ID] = f.Key
		owned[f.Key] = true
		oi, err := store.Stat(ctx, f.Key)
		switch {
		case err != nil && !isNotFound(err):
			return err
		case err != nil:
			r.breach("visible file %s has no object", f.ID)
		case oi.SHA256 != nil && f.Checksum != nil && *f.Checksum != "sha256:"+base64.StdEncoding.EncodeToString(oi.SHA256):
			r.breach("visible file %s: its object holds other bytes (checksum)", f.ID)
		case oi.Size != f.SizeBytes:
			r.breach("visible file %s: its object holds %d bytes, the row says %d", f.ID, oi.Size, f.SizeBytes)
		}
	case tombstone:
		r.Tombstones++
		owned[f.Key] = true // may still receive a late write; the sweeps keep deleting it
	case f.DeletedAt != nil && f.DeletionPendingAt == nil:
		r.Deleted++
	default:
		r.Other++
		owned[f.Key] = true
		if f.PendingKey != nil {
			owned[*f.PendingKey] = true
		}
	}
	if f.StagingCleanupAt != nil {
		r.breach("file %s: its staging object was never swept", f.ID)
	}
	return nil
}

func isNotFound(err error) bool { return errors.Is(err, storage.ErrNotFound) }

// chunks checks that no chunk row of a resumable upload is left after
// settling; a row left owns its key (its object is reported once, here).
func (r *Report) chunks(ctx context.Context, pool *pgxpool.Pool, owned map[string]bool) error {
	rows, err := pool.Query(ctx, "SELECT key, trimmed_at IS NOT NULL FROM uploaded_file_chunk")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var givenUp bool
		if err := rows.Scan(&key, &givenUp); err != nil {
			return err
		}
		owned[key] = true
		r.breach("chunk %s left after settling (given up: %v)", key, givenUp)
	}
	return rows.Err()
}

// variants checks every variant row: ready, of a visible file, with its
// object; each owns its key.
func (r *Report) variants(ctx context.Context, pool *pgxpool.Pool, store storage.Store, owned map[string]bool) error {
	rows, err := pool.Query(ctx, `
SELECT v.key, v.status, v.size_bytes,
    (f.status = 'ready' AND f.upload_pending_at IS NULL AND f.deletion_pending_at IS NULL AND f.deleted_at IS NULL)
FROM uploaded_file_variant v JOIN uploaded_file f ON f.id = v.file_id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key, status string
		var size *int64
		var fileVisible bool
		if err := rows.Scan(&key, &status, &size, &fileVisible); err != nil {
			return err
		}
		r.Variants++
		owned[key] = true
		if status != "ready" {
			r.breach("variant %s left %s after settling", key, status)
			continue
		}
		if !fileVisible {
			r.breach("variant %s outlived its file", key)
		}
		oi, err := store.Stat(ctx, key)
		switch {
		case err != nil && !isNotFound(err):
			return err
		case err != nil:
			r.breach("ready variant %s has no object", key)
		case size != nil && oi.Size != *size:
			r.breach("variant %s: its object holds %d bytes, the row says %d", key, oi.Size, *size)
		}
	}
	return rows.Err()
}

// usage checks that the usage the transitions kept equals the sum over
// the rows that hold space, for every owner and every tenant.
func (r *Report) usage(ctx context.Context, pool *pgxpool.Pool) error {
	rows, err := pool.Query(ctx, `
WITH holding AS (
    SELECT tenant_code, user_id, size_bytes, 1 AS files
    FROM uploaded_file
    WHERE deletion_pending_at IS NULL AND deleted_at IS NULL
    UNION ALL
    SELECT f.tenant_code, f.user_id, v.size_bytes, 0
    FROM uploaded_file_variant v JOIN uploaded_file f ON f.id = v.file_id
    WHERE v.size_bytes IS NOT NULL
), counted AS (
    SELECT tenant_code, coalesce(user_id, '') AS user_id, sum(size_bytes)::bigint AS bytes, sum(files)::bigint AS files
    FROM holding
    GROUP BY GROUPING SETS ((tenant_code, user_id), (tenant_code))
)
SELECT coalesce(u.tenant_code, c.tenant_code), coalesce(u.user_id, c.user_id),
    coalesce(u.bytes, 0), coalesce(u.files, 0), coalesce(c.bytes, 0), coalesce(c.files, 0)
FROM uploaded_file_usage u
FULL JOIN counted c ON c.tenant_code = u.tenant_code AND c.user_id = u.user_id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var tenant, user string
		var kb, kf, cb, cf int64
		if err := rows.Scan(&tenant, &user, &kb, &kf, &cb, &cf); err != nil {
			return err
		}
		r.UsageRows++
		if kb != cb || kf != cf {
			r.breach("usage of %s/%q: kept %d bytes in %d files, the rows hold %d in %d", tenant, user, kb, kf, cb, cf)
		}
	}
	return rows.Err()
}

// events checks every row's lifecycle events, in order: a visible row has
// file.ready; a row that was ready and is deleted file.ready, then
// file.deleted or file.expired, then file.purged; an upload that never
// became ready and is gone upload.failed or upload.abandoned only.
func (r *Report) events(ctx context.Context, pool *pgxpool.Pool, all []db.UploadedFile) error {
	rows, err := pool.Query(ctx, "SELECT file_id, type FROM uploaded_file_event ORDER BY tx, seq")
	if err != nil {
		return err
	}
	events := map[uuid.UUID][]string{}
	for rows.Next() {
		var id uuid.UUID
		var typ string
		if err := rows.Scan(&id, &typ); err != nil {
			rows.Close()
			return err
		}
		if typ != "file.attached" && typ != "file.detached" && typ != "file.variant-ready" {
			events[id] = append(events[id], typ)
		}
		r.Events++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, f := range all {
		es := events[f.ID]
		wasReady := f.CompletedAt != nil
		settled := f.DeletedAt != nil && f.DeletionPendingAt == nil
		switch {
		case visible(f):
			if len(es) != 1 || es[0] != "file.ready" {
				r.breach("visible file %s: events %v, want [file.ready]", f.ID, es)
			}
		case wasReady && settled:
			if len(es) != 3 || es[0] != "file.ready" || (es[1] != "file.deleted" && es[1] != "file.expired") || es[2] != "file.purged" {
				r.breach("deleted file %s: events %v, want file.ready, file.deleted or file.expired, file.purged", f.ID, es)
			}
		case !wasReady && settled:
			if len(es) != 1 || (es[0] != "upload.failed" && es[0] != "upload.abandoned") {
				r.breach("upload %s that never became ready: events %v, want one upload.failed or upload.abandoned", f.ID, es)
			}
		}
	}
	return nil
}
