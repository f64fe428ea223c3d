package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// TestProgressBarOnATerminal: on a terminal (a pseudo-terminal of
// script(1), as an operator's shell is), reconcile draws a bar on stderr
// whose every frame counts within the walk and shows a rate the walk could
// have had -- never the absurd rate of a count over the first instant --
// and the summary follows it.
func TestProgressBarOnATerminal(t *testing.T) {
	t.Parallel()
	script, err := exec.LookPath("script")
	require.NoError(t, err, "script(1), from util-linux, gives the command a terminal")
	bin, err := buildOnce()
	require.NoError(t, err)
	url := pgtest.NewDatabase(t)
	root := t.TempDir()
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("localRoot: "+root+"\n"), 0o600))
	const objects = 30000 // a walk long enough for frames past the first
	for i := range objects {
		p := filepath.Join(root, "core", fmt.Sprintf("t-%d", i/1000), fmt.Sprintf("%05d.pdf", i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o750))
		require.NoError(t, os.WriteFile(p, []byte("%PDF-1.4\n"), 0o600))
	}
	typescript := filepath.Join(t.TempDir(), "typescript")
	command := fmt.Sprintf("%s --database-url '%s' maintenance --config %s reconcile", bin, url, cfgFile)
	out, err := exec.Command(script, "-qfec", command, typescript).CombinedOutput()
	require.NoError(t, err, "%s", out)
	b, err := os.ReadFile(typescript)
	require.NoError(t, err)
	screen := strings.ReplaceAll(string(b), "\r", "\n")
	frame := regexp.MustCompile(`reconcile\s.*\((\d+)(?:/[0-9-]+)?, (\d+) objects/(s|min|hr)\)`)
	counted := 0
	for _, f := range frame.FindAllStringSubmatch(screen, -1) {
		done, _ := strconv.Atoi(f[1])
		rate, _ := strconv.Atoi(f[2])
		require.LessOrEqual(t, done, objects, "a frame counts within the walk: %s", f[0])
		if f[3] == "s" {
			require.Less(t, rate, 5_000_000, "a rate the walk could have had: %s", f[0])
		}
		if done > 0 {
			counted++
		}
	}
	require.Positive(t, counted, "the bar counted as the walk went: %q", screen)
	require.Contains(t, screen, fmt.Sprintf("reconcile: %d objects", objects), "the summary follows the bar")
}
