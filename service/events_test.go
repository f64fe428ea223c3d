package service_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

// event is one outbox row as the tests read it.
type event struct {
	ID       uuid.UUID
	Type     string
	Tenant   string
	Occurred time.Time
	Rule     *string
	Data     map[string]any
}

// events reads the outbox rows of file id in outbox order.
func (b *bundle) events(id uuid.UUID) []event {
	b.t.Helper()
	rows, err := b.db.Pool.Query(context.Background(),
		"SELECT id, type, tenant_code, occurred_at, rule, data FROM uploaded_file_event WHERE file_id = $1 ORDER BY tx, seq", id)
	require.NoError(b.t, err)
	defer rows.Close()
	var out []event
	for rows.Next() {
		var e event
		var data []byte
		require.NoError(b.t, rows.Scan(&e.ID, &e.Type, &e.Tenant, &e.Occurred, &e.Rule, &data))
		require.NoError(b.t, json.Unmarshal(data, &e.Data))
		out = append(out, e)
	}
	require.NoError(b.t, rows.Err())
	return out
}

func types(es []event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Type
	}
	return out
}

// TestEventsOfABufferUpload: ready with the HTTP-safe representation at
// the transition's database time, attached, deleted, then purged once the
// bytes are gone.
func TestEventsOfABufferUpload(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	f := b.upload(alice)
	es := b.events(f.ID)
	require.Equal(t, []string{"file.ready"}, types(es))
	ready := es[0]
	require.EqualValues(t, 7, ready.ID.Version(), "a UUIDv7 id")
	require.Equal(t, "acme", ready.Tenant)
	row := b.row(f.ID)
	require.True(t, ready.Occurred.Equal(*row.CompletedAt), "the transition's time (the service's clock)")
	require.Equal(t, map[string]any{
		"id": f.ID.String(), "userId": "alice", "departmentCode": "sales", "originalName": "report.pdf",
		"sizeBytes": float64(len(pdf)), "contentType": "application/pdf", "visibility": "private", "status": "ready",
		"isTemporary": false, "disposition": "attachment", "checksum": *row.Checksum,
		"createdAt":   row.CreatedAt.UTC().Format("2006-01-02T15:04:05.000000Z"),
		"completedAt": row.CompletedAt.UTC().Format("2006-01-02T15:04:05.000000Z"),
	}, ready.Data, "the HTTP-safe representation: no key, no cdn")

	require.NoError(t, b.svc.MarkUsed(alice, []string{f.ID.String()}, &service.Meta{Module: "crm", Entity: "invoice", EntityID: "7"}, nil))
	require.NoError(t, b.svc.DeleteByID(alice, f.ID.String()))
	b.settle()
	es = b.events(f.ID)
	require.Equal(t, []string{"file.ready", "file.attached", "file.deleted", "file.purged"}, types(es))
	require.Equal(t, "invoice", es[1].Data["entity"], "attached carries the provenance it was given")
	for i := 1; i < len(es); i++ {
		require.False(t, es[i].Occurred.Before(es[i-1].Occurred))
		require.Greater(t, es[i].ID.String(), es[i-1].ID.String(), "UUIDv7 ids sort by time")
	}
}

// TestRolledBackTransitionHasNoEvent: a caller's rolled-back transaction
// leaves no event; the committed one has exactly one.
func TestRolledBackTransitionHasNoEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	f := b.upload(alice)
	ctx := context.Background()
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, b.svc.MarkUsed(alice, []string{f.ID.String()}, nil, tx))
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, []string{"file.ready"}, types(b.events(f.ID)), "the rollback took the event with it")

	tx, err = b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, b.svc.MarkUsed(alice, []string{f.ID.String()}, nil, tx))
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, []string{"file.ready", "file.attached"}, types(b.events(f.ID)))

	// A refused batch (one id out of scope) writes nothing either.
	other := b.upload(as("acme", "bob"))
	requireNotFound(t, b.svc.MarkUsed(alice, []string{f.ID.String(), other.ID.String()}, nil, nil))
	require.Equal(t, []string{"file.ready", "file.attached"}, types(b.events(f.ID)))
}

// TestEventsOfChangeFiles: the new file is attached; the old one detached,
// then deleted, then purged.
func TestEventsOfChangeFiles(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	old, cur := b.upload(alice), b.upload(alice)
	require.NoError(t, b.svc.ChangeFiles(alice, []string{old.Key}, []string{cur.Key}, "invoice", "7"))
	b.settle()
	require.Equal(t, []string{"file.ready", "file.detached", "file.deleted", "file.purged"}, types(b.events(old.ID)))
	require.Equal(t, []string{"file.ready", "file.attached"}, types(b.events(cur.ID)))

	// A plain Delete by reference deletes without detaching.
	require.NoError(t, b.svc.Delete(alice, []string{cur.Key}))
	require.Equal(t, []string{"file.ready", "file.attached", "file.deleted", "file.purged"}, types(b.events(cur.ID)))
}

// TestEventsOfDirectUploads: ready at complete; a verification failure is
// upload.failed with its rule; an abort and an expired upload are
// upload.abandoned; none of them is purged (never ready).
func TestEventsOfDirectUploads(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			body := realDOCX(t)
			ok, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
			require.NoError(t, err)
			b.write(alice, ok, body)
			_, err = b.svc.CompleteUpload(alice, ok.ID.String())
			require.NoError(t, err)
			es := b.events(ok.ID)
			require.Equal(t, []string{"file.ready"}, types(es))
			require.Equal(t, "plan.docx", es[0].Data["originalName"])
			require.NotContains(t, es[0].Data, "key")

			png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 200)...)
			bad, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, png), nil)
			require.NoError(t, err)
			b.write(alice, bad, png)
			_, err = b.svc.CompleteUpload(alice, bad.ID.String())
			require.ErrorIs(t, err, service.ErrUploadVerificationFailed)
			es = b.events(bad.ID)
			require.Equal(t, []string{"upload.failed"}, types(es))
			require.NotNil(t, es[0].Rule)
			require.Equal(t, service.Rule(err), *es[0].Rule, "the rule the client was told")
			require.Equal(t, "failed", es[0].Data["status"])

			aborted, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
			require.NoError(t, err)
			require.NoError(t, b.svc.AbortUpload(alice, aborted.ID.String()))

			expired, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
			require.NoError(t, err)
			b.settle()
			require.Equal(t, []string{"upload.abandoned"}, types(b.events(aborted.ID)), "once, however many sweeps pass its tombstone")
			require.Equal(t, []string{"upload.abandoned"}, types(b.events(expired.ID)))
			require.Equal(t, []string{"upload.failed"}, types(b.events(bad.ID)), "a failed upload is not abandoned as well")
		})
	}
}

// TestEventsOfTemporaryExpiry: a temporary file expires (file.expired from
// the sweep) and is purged; an unused permanent file past
// cleanupAfterDays expires too.
func TestEventsOfTemporaryExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	tmp, err := b.svc.UploadTemporary(alice, bytesReader("notes"), "notes.txt", nil)
	require.NoError(t, err)
	b.clock.Advance(25 * time.Hour)
	n, err := b.svc.CleanupExpiredTemporaryFiles(context.Background(), nil, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"file.ready", "file.expired", "file.purged"}, types(b.events(tmp.ID)))

	unused := b.upload(alice)
	b.clock.Advance(24 * time.Hour)
	n, err = b.svc.UnsafeSystemPurgeUnusedBatch(context.Background(), b.clock.Now(), 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"file.ready", "file.expired", "file.purged"}, types(b.events(unused.ID)))
}

// TestAbandonedBufferUpload: a buffer upload whose writer never reported
// back is upload.abandoned when the sweep reclaims it, and never purged.
func TestAbandonedBufferUpload(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	f := b.upload(alice)
	// Put the row back into the hidden state a writer that died leaves.
	b.exec("UPDATE uploaded_file SET status = 'pending', upload_pending_at = $2, completed_at = NULL WHERE id = $1", f.ID, b.clock.Now().Add(15*time.Minute))
	b.exec("DELETE FROM uploaded_file_event WHERE file_id = $1", f.ID)
	b.settle()
	require.Equal(t, []string{"upload.abandoned"}, types(b.events(f.ID)))
}
