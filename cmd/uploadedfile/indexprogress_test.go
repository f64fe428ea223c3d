package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db/migrations"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/syncbuf"
)

// TestMigrateUpShowsIndexBuilds: while migrate up builds an index, --output
// json prints progress objects that name it and its phase (read from
// pg_stat_progress_create_index). A writer's open transaction holds the
// build in its first wait, so the test sees it however fast the build is.
func TestMigrateUpShowsIndexBuilds(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	ctx := context.Background()
	m, err := migrations.Open(url)
	require.NoError(t, err)
	require.NoError(t, m.Migrate(20261128400000)) // the version before the record list index
	_, _ = m.Close()

	writer, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer func() { _ = writer.Close(ctx) }()
	tx, err := writer.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "UPDATE uploaded_file SET updated_at = updated_at WHERE false") // a writer's lock: the build waits for it
	require.NoError(t, err)

	var out, errOut syncbuf.Buffer
	cmd := newRootCommand(&out, &errOut)
	cmd.SetArgs([]string{"--database-url", url, "--output", "json", "--progress-every", "100ms", "migrate", "up"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()

	var seen map[string]any
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			var obj struct{ Progress map[string]any }
			if json.Unmarshal([]byte(line), &obj) == nil && obj.Progress != nil && obj.Progress["index"] == "uploaded_file_list_record_idx" {
				seen = obj.Progress
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "a progress object names the index being built: %s", out.String())
	require.Equal(t, "migrate up", seen["command"])
	require.Equal(t, "uploaded_file", seen["table"])
	require.Contains(t, seen["phase"], "waiting for writers", "held by the writer's transaction")
	require.Equal(t, "lockers", seen["unit"])

	require.NoError(t, tx.Commit(ctx)) // the writer ends: the build goes on
	select {
	case err := <-done:
		require.NoError(t, err, errOut.String())
	case <-time.After(60 * time.Second):
		t.Fatal("migrate up did not end after the writer did")
	}
	last := lastLine(out.String())
	require.JSONEq(t, fmt.Sprintf(`{"version":%d,"binaryVersion":%d}`, migrations.Latest(), migrations.Latest()), last, "the summary comes last")
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	last := ""
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			last = sc.Text()
		}
	}
	return last
}
