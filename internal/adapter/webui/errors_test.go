package webui_test

import (
	"bytes"
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

// errorsRun is what web/e2e/errors.mjs reports.
type errorsRun struct {
	First   []uploadOutcome
	Offered int
	Retried []uploadOutcome
	Heap    struct{ PeakUsed, PeakBacking, Before, AfterAdd float64 }
	Logs    []string
}

type uploadOutcome struct {
	Name, Error, ID, Status *string
}

// TestUploadErrorsInChromium: each class of failure, in headless Chromium
// through the Uppy plugin, shows a message a person can read -- what went
// wrong, the rule, the host that could not be reached and why -- and offers
// Retry only when retrying can mend it; a Retry continues the same upload
// (no second file) while its target is valid, and starts a new one (the old
// one aborted, its quota given back) when it expired.
func TestUploadErrorsInChromium(t *testing.T) {
	t.Parallel()
	csv := func(n int) []byte { return bytes.Repeat([]byte("a,b\n"), n) }
	count := func(e *pageEnv, sql string, args ...any) int {
		var n int
		require.NoError(t, e.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
		return n
	}

	t.Run("refused type", func(t *testing.T) {
		t.Parallel()
		e := startPageEnv(t, service.DriverLocal, pageOptions{})
		png := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{0}, 64)...)
		var run errorsRun
		e.browse(t, "errors.mjs", &run, "UF_SCENARIO=refused", "UF_FILES="+writeFiles(t, map[string][]byte{"photo.jpg": png}))
		require.Len(t, run.First, 1)
		msg := deref(run.First[0].Error)
		require.Contains(t, msg, "The bytes received are not the file declared: the file's content is of another type than its name says (content.other-type)", "the server's words for the rule")
		require.Contains(t, msg, "core.file.upload-verification-failed")
		require.Zero(t, run.Offered, "no Retry for a refused file: %s", msg)
	})

	t.Run("quota", func(t *testing.T) {
		t.Parallel()
		e := startPageEnv(t, service.DriverLocal, pageOptions{config: func(c *service.Config) { c.Quota.OwnerFiles = 2 }})
		var run errorsRun
		e.browse(t, "errors.mjs", &run, "UF_SCENARIO=quota", "UF_FILES="+writeFiles(t, map[string][]byte{"a.csv": csv(2), "b.csv": csv(3), "c.csv": csv(4)}))
		require.Len(t, run.First, 3)
		var refused []string
		for _, o := range run.First {
			if o.Error != nil {
				refused = append(refused, *o.Error)
			}
		}
		require.Len(t, refused, 1, "%+v", run.First)
		require.Contains(t, refused[0], "There is no room left for this file (the storage quota is reached)")
		require.Contains(t, refused[0], service.RuleQuotaOwnerFiles)
		require.Zero(t, run.Offered, "no Retry for a file over the quota")
	})

	t.Run("network down, then Retry", func(t *testing.T) {
		t.Parallel()
		e := startPageEnv(t, service.DriverLocal, pageOptions{})
		var run errorsRun
		e.browse(t, "errors.mjs", &run, "UF_SCENARIO=network", "UF_FILES="+writeFiles(t, map[string][]byte{"net.csv": csv(5)}))
		require.Len(t, run.First, 1)
		msg := deref(run.First[0].Error)
		api, _ := url.Parse(e.api)
		require.Contains(t, msg, "The upload target at "+api.Host+" could not be reached")
		require.Contains(t, msg, "CORS rules do not allow this page's origin")
		require.Equal(t, 1, run.Offered, "Retry is offered: the network may come back")
		require.Len(t, run.Retried, 1)
		require.Nil(t, run.Retried[0].Error, "%v", run.Logs)
		require.Equal(t, "ready", deref(run.Retried[0].Status))
		require.Equal(t, 1, count(e, "SELECT count(*) FROM uploaded_file WHERE original_name = 'net.csv'"), "the Retry continued the same upload")
	})

	for _, driver := range []string{service.DriverLocal, service.DriverS3} {
		t.Run("expired target, then Retry on "+driver, func(t *testing.T) {
			t.Parallel()
			e := startPageEnv(t, driver, pageOptions{config: func(c *service.Config) { c.UploadURLTTLSeconds = 2 }})
			var run errorsRun
			e.browse(t, "errors.mjs", &run, "UF_SCENARIO=expired", "UF_HOLD_MS=3500", "UF_FILES="+writeFiles(t, map[string][]byte{"late.csv": csv(6)}))
			require.Len(t, run.First, 1)
			require.Contains(t, deref(run.First[0].Error), "The upload target expired before the file was sent; retrying starts it again")
			require.Equal(t, 1, run.Offered)
			require.Len(t, run.Retried, 1)
			require.Nil(t, run.Retried[0].Error, "%v", run.Logs)
			require.Equal(t, "ready", deref(run.Retried[0].Status))
			require.Equal(t, 1, count(e, "SELECT count(*) FROM uploaded_file WHERE original_name = 'late.csv' AND status = 'ready'"))
			require.Equal(t, 1, count(e, `SELECT count(*) FROM uploaded_file WHERE original_name = 'late.csv' AND status = 'pending'
				AND (deletion_pending_at IS NOT NULL OR deleted_at IS NOT NULL)`), "the expired upload was aborted")
			require.Equal(t, 1, count(e, "SELECT files::int FROM uploaded_file_usage WHERE tenant_code = 'dev' AND user_id = 'dev-user'"),
				"only the ready file holds quota")
		})
	}

	t.Run("bucket CORS blocks the page", func(t *testing.T) {
		t.Parallel()
		e := startPageEnv(t, service.DriverS3, pageOptions{bucketOrigins: func(string) []string { return []string{"https://app.example.com"} }})
		var run errorsRun
		e.browse(t, "errors.mjs", &run, "UF_SCENARIO=cors", "UF_FILES="+writeFiles(t, map[string][]byte{"c.csv": csv(7)}))
		require.Len(t, run.First, 1)
		msg := deref(run.First[0].Error)
		endpoint, _ := url.Parse(e.svc.EffectiveConfig().Endpoint)
		require.Contains(t, msg, "The upload target at "+endpoint.Host+" could not be reached")
		require.Contains(t, msg, "its CORS rules do not allow this page's origin (http://127.0.0.1:")
	})

	t.Run("memory of a 25 MiB upload", func(t *testing.T) {
		t.Parallel()
		const size = 25 << 20
		e := startPageEnv(t, service.DriverLocal, pageOptions{config: func(c *service.Config) { c.MaxFileSizeBytes = size }})
		var run errorsRun
		e.browse(t, "errors.mjs", &run, "UF_SCENARIO=memory", "UF_FILES="+writeFiles(t, map[string][]byte{"big.csv": csv(size / 4)}))
		require.Len(t, run.First, 1)
		require.Nil(t, run.First[0].Error, "%v", run.Logs)
		require.Equal(t, "ready", deref(run.First[0].Status))
		grew := run.Heap.PeakBacking - run.Heap.Before
		t.Logf("after adding the file: %.1f MiB", run.Heap.AfterAdd/(1<<20))
		t.Logf("25 MiB upload: the page's JS heap peaked at %.1f MiB, heap and ArrayBuffers at %.1f MiB (%.1f MiB before)",
			run.Heap.PeakUsed/(1<<20), run.Heap.PeakBacking/(1<<20), run.Heap.Before/(1<<20))
		require.Positive(t, run.Heap.PeakBacking, "the memory was sampled")
		// Held whole, the file alone would add 25 MiB. Hashed in 1 MiB
		// slices the growth is about 2.4 MiB on a quiet machine, and up to
		// about 12 MiB on a loaded one, where V8 accounts the dead slices'
		// memory as freed only later: the bound tells the two apart.
		require.Less(t, grew, float64(size*3/4), "the file is hashed and sent in chunks, never held whole")
	})
}
