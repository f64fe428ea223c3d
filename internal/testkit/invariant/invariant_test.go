package invariant_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
	"github.com/uploadedfile/uploadedfile/internal/testkit/invariant"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/service"
)

// TestCheckFindsEachBreach: a store and database kept by the service hold
// every invariant; then each kind of breach, made by hand, is reported.
func TestCheckFindsEachBreach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t)
	root := t.TempDir()
	store, err := local.New(local.Config{Root: root})
	require.NoError(t, err)
	svc, err := service.New(ctx, service.Config{LocalRoot: root}, pool, service.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	alice := service.WithRequestContext(ctx, service.RequestContext{Tenant: "acme", UserID: "alice"})
	const pdf = "%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
	kept, err := svc.Upload(alice, strings.NewReader(pdf), "kept.pdf", nil)
	require.NoError(t, err)
	gone, err := svc.Upload(alice, strings.NewReader(pdf), "gone.pdf", nil)
	require.NoError(t, err)
	require.NoError(t, svc.DeleteByID(alice, gone.ID.String()))
	keys := func() []string {
		var out []string
		require.NoError(t, store.List(ctx, "", "", func(oi storage.ObjectInfo) error { out = append(out, oi.Key); return nil }))
		return out
	}

	r, err := invariant.Check(ctx, pool, store, keys())
	require.NoError(t, err)
	require.Empty(t, r.Violations)
	require.Equal(t, 2, r.Rows)
	require.Equal(t, 1, r.Ready)
	require.Equal(t, 1, r.Deleted)
	require.Contains(t, r.Visible, kept.ID)

	// An orphan, a visible file without its object, usage that drifted,
	// a lost event.
	_, err = store.Put(ctx, "core/acme/orphan.pdf", bytes.NewReader([]byte(pdf)), storage.PutOptions{ContentType: "application/pdf", Size: int64(len(pdf))})
	require.NoError(t, err)
	var key string
	require.NoError(t, pool.QueryRow(ctx, "SELECT key FROM uploaded_file WHERE id = $1", kept.ID).Scan(&key))
	require.NoError(t, store.Delete(ctx, key))
	_, err = pool.Exec(ctx, "UPDATE uploaded_file_usage SET files = files + 1 WHERE tenant_code = 'acme' AND user_id = 'alice'")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "DELETE FROM uploaded_file_event WHERE file_id = $1 AND type = 'file.purged'", gone.ID)
	require.NoError(t, err)

	r, err = invariant.Check(ctx, pool, store, keys())
	require.NoError(t, err)
	all := strings.Join(r.Violations, "\n")
	require.Contains(t, all, "object core/acme/orphan.pdf has no row that owns it")
	require.Contains(t, all, "visible file "+kept.ID.String()+" has no object")
	require.Contains(t, all, `usage of acme/"alice": kept`)
	require.Contains(t, all, "deleted file "+gone.ID.String()+": events [file.ready file.deleted]")
	require.Len(t, r.Violations, 4, all)
}
