package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/imagevariant"
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
	require.Contains(t, out, "image engine: "+imagevariant.Describe(imagevariant.Engines()[0])+" (built in: ")
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

// TestHelpNamesRealKeys: every configuration key a command's help names
// (quota.tenantBytes, events.sinks.*, ...) is a key of the configuration
// model.
func TestHelpNamesRealKeys(t *testing.T) {
	t.Parallel()
	known := knownKeys(reflect.TypeFor[fileConfig](), "")
	key := regexp.MustCompile(`\b(?:quota|auth|events|variants|scan|remoteClone|cors|docs|tracing)\.[A-Za-z*.]*[A-Za-z*]`)
	var walk func(c *cobra.Command)
	checked := 0
	walk = func(c *cobra.Command) {
		texts := []string{c.Short, c.Long, c.Example}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) { texts = append(texts, f.Usage) })
		for _, text := range texts {
			for _, k := range key.FindAllString(text, -1) {
				checked++
				family := strings.TrimSuffix(k, "*") // "quota.*": any key of the family
				ok := slices.ContainsFunc(known, func(p string) bool {
					return keyMatches(p, k) || strings.HasPrefix(p, k+".") || (family != k && strings.HasPrefix(p, family))
				})
				require.True(t, ok, "%q in the help of %q is no configuration key", k, c.CommandPath())
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand(io.Discard, io.Discard))
	require.Positive(t, checked, "the help names keys")
}

// TestVersionCarriesTheStampedCommit: a build without VCS information
// (outside a repository, -buildvcs=false) reports the commit make build
// stamps with -ldflags.
func TestVersionCarriesTheStampedCommit(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "uploadedfile")
	out, err := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-X main.buildCommit=0123456789abcdef", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(bin, "version", "--output", "json").Output()
	require.NoError(t, err)
	require.Contains(t, string(out), `"commit":"0123456789abcdef"`)
	out, err = exec.Command(bin, "completion", "bash").Output()
	require.NoError(t, err)
	require.Contains(t, string(out), "__start_uploadedfile", "completion for the binary's own name")
	renamed := filepath.Join(t.TempDir(), "uf")
	require.NoError(t, os.Rename(bin, renamed))
	out, err = exec.Command(renamed, "completion", "bash").Output()
	require.NoError(t, err)
	require.Contains(t, string(out), "__start_uf", "a renamed binary completes under its name")
}
