package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// TestEveryCommandExplainsItself: every command's --help carries an
// example line.
func TestEveryCommandExplainsItself(t *testing.T) {
	t.Parallel()
	root := newRootCommand(io.Discard, io.Discard)
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	seen := 0
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || strings.HasPrefix(c.CommandPath(), "uploadedfile completion") {
			return
		}
		var out bytes.Buffer
		c.SetOut(&out)
		require.NoError(t, c.Help())
		require.Contains(t, out.String(), "Examples:", "%s --help has no example", c.CommandPath())
		require.Contains(t, out.String(), "uploadedfile ", c.CommandPath())
		seen++
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	require.GreaterOrEqual(t, seen, 16, "every command was visited")
}

// TestVersionAndCompletion: version reports the build; completion scripts
// come from cobra.
func TestVersionAndCompletion(t *testing.T) {
	t.Parallel()
	out, err := run(t, context.Background(), "postgres://unused", "version")
	require.NoError(t, err)
	require.Contains(t, out, "uploadedfile ")
	require.Contains(t, out, "commit: ")
	require.Contains(t, out, "go: go1.")
	out, err = run(t, context.Background(), "postgres://unused", "completion", "bash")
	require.NoError(t, err)
	require.Contains(t, out, "bash completion")
}

// TestMissingDatabaseIsExplained: every command that needs the database
// names the URL it tried (password redacted), where it came from, and how
// to start PostgreSQL.
func TestMissingDatabaseIsExplained(t *testing.T) {
	t.Parallel()
	missing := "postgres://postgres:s3cret@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("localRoot: "+t.TempDir()+"\nauth:\n  hmacSecret: "+strings.Repeat("s", 40)+"\n"), 0o600))
	for _, args := range [][]string{
		{"serve", "--config", cfg, "--listen", "127.0.0.1:0"},
		{"migrate", "up"},
		{"maintenance", "--config", cfg, "retry-deletions"},
	} {
		_, err := run(t, context.Background(), missing, args...)
		require.Error(t, err, args)
		msg := err.Error()
		require.Contains(t, msg, "127.0.0.1:1", args)
		require.NotContains(t, msg, "s3cret", "the password is redacted")
		require.Contains(t, msg, "DATABASE_URL", args)
		require.Contains(t, msg, "start PostgreSQL", args)
	}
}
