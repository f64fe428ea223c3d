package layers

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// outsideReferences are what a file of the repository must not say: a
// path or a document outside the clone, a tracker's numbers, the place
// the project was built or measured. docs/behaviour.md is the behaviour
// document; the decisions are docs/decisions.md.
var outsideReferences = []struct {
	what string
	re   *regexp.Regexp
}{
	{"a path outside the repository", regexp.MustCompile(`\.\./shared\b`)},
	{"a design document outside the repository", regexp.MustCompile(`DESIGN\.md`)},
	{"a specification outside the repository (docs/behaviour.md is the behaviour)", regexp.MustCompile(`\b([Tt]he|[Aa]) spec\b|\bspec (rules?|floor|codes?)\b`)},
	{"a tracker's number", regexp.MustCompile(`(?i)\bissues? #?[0-9]+\b`)},
	{"the place it was built or measured", regexp.MustCompile(`(?i)\bthis\s+workplace\b|\b(this|these|that|a\s+\w+th|the\s+same)\s+(\S+\s+)?(machines?|VMs?)\b`)},
}

// TestSelfContained: no tracked file but generated code and third-party
// bundles speaks of anything outside the repository -- a maintainer who
// clones it can follow every reference.
func TestSelfContained(t *testing.T) {
	cmd := exec.Command("git", "ls-files")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err)
	files := strings.Fields(string(out))
	require.Greater(t, len(files), 100, "git listed the repository's files")
	checked := 0
	for _, f := range files {
		if notOurs(f) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("../..", f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		require.NoError(t, err)
		if bytes.IndexByte(b, 0) >= 0 || generatedGo.Match(b) {
			continue
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			for _, r := range outsideReferences {
				if m := r.re.FindString(line); m != "" {
					t.Errorf("%s:%d: %q is %s", f, i+1, m, r.what)
				}
			}
		}
	}
	require.Greater(t, checked, 100, "the repository's own files were read")
}

// notOurs is a file the test leaves alone: generated code, checksums,
// lock files and the bundled third-party assets.
func notOurs(f string) bool {
	switch {
	case strings.HasPrefix(f, "gen/"), strings.Contains(f, "/dist/"), strings.Contains(f, "node_modules/"):
		return true
	case strings.HasSuffix(f, "go.sum"), strings.HasSuffix(f, "package-lock.json"), f == "internal/layers/selfcontained_test.go":
		return true
	}
	return false
}
