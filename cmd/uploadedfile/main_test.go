package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/pgtest"
)

// run executes the command line against databaseURL and returns stdout.
func run(t *testing.T, ctx context.Context, databaseURL string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand(&out, &errOut)
	cmd.SetArgs(append([]string{"--database-url", databaseURL}, args...))
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	ctx := context.Background()

	out, err := run(t, ctx, url, "migrate", "version")
	require.NoError(t, err)
	require.Equal(t, "version: none (no migration applied)\n", out)

	out, err = run(t, ctx, url, "migrate", "up")
	require.NoError(t, err)
	require.Equal(t, "version: 20261122000000\n", out)

	_, err = run(t, ctx, url, "migrate", "down")
	require.ErrorContains(t, err, "exactly one of --steps N")

	out, err = run(t, ctx, url, "migrate", "down", "--steps", "1")
	require.NoError(t, err)
	require.Equal(t, "version: 1\n", out)

	out, err = run(t, ctx, url, "migrate", "down", "--all")
	require.NoError(t, err)
	require.Equal(t, "version: none (no migration applied)\n", out)

	out, err = run(t, ctx, url, "migrate", "up")
	require.NoError(t, err)
	require.Equal(t, "version: 20261122000000\n", out)

	_, err = run(t, ctx, "mysql://x", "migrate", "up")
	require.ErrorContains(t, err, "unsupported database URL scheme")
}

// TestServeDevCreatesDatabaseAndAnswersHealth: --dev creates a missing
// database, migrates it, serves /healthz and /readyz, and shuts down on
// cancel.
func TestServeDevCreatesDatabaseAndAnswersHealth(t *testing.T) {
	t.Parallel()
	// A database that does not exist yet, on the test server.
	u, err := url.Parse(pgtest.ServerURL())
	require.NoError(t, err)
	name := fmt.Sprintf("uploadedfile_devtest_%d_%d", os.Getpid(), time.Now().UnixNano())
	u.Path = "/" + name
	missing := u.String()
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), pgtest.ServerURL())
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		require.NoError(t, err)
	})

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		cmd := newRootCommand(pw, io.Discard)
		cmd.SetArgs([]string{"--database-url", missing, "serve", "--dev", "--listen", "127.0.0.1:0"})
		done <- cmd.ExecuteContext(ctx)
		pw.Close()
	}()

	line := make([]byte, 256)
	n, err := pr.Read(line)
	require.NoError(t, err)
	addr := regexp.MustCompile(`http://[0-9.:]+`).FindString(string(line[:n]))
	require.NotEmpty(t, addr, "the server prints where it listens: %q", line[:n])
	go io.Copy(io.Discard, pr) //nolint:errcheck

	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
		resp, err := http.Get(addr + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Equal(t, want, string(body), path)
	}

	out, err := run(t, context.Background(), missing, "migrate", "version")
	require.NoError(t, err)
	require.Equal(t, "version: 20261122000000\n", out, "serve migrated the new database")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "graceful shutdown")
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop after cancel")
	}
}
