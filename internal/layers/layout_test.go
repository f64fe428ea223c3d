package layers

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// layoutCell is a folder named in the first column of README.md's layout
// table: | `internal/storage/` | ... |.
var layoutCell = regexp.MustCompile("`([a-z][a-z0-9_./-]*/)`")

// TestLayoutTableIsComplete: README.md's layout table names a folder for
// every package go list sees (generated code aside), and every folder it
// names exists -- the table a maintainer reads first cannot fall behind
// the tree.
func TestLayoutTableIsComplete(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var folders []string
	for _, line := range strings.Split(string(readme), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "| `") {
			continue
		}
		for _, m := range layoutCell.FindAllStringSubmatch(cells[1], -1) {
			folders = append(folders, m[1])
		}
	}
	require.Greater(t, len(folders), 20, "README.md has its layout table")
	for _, f := range folders {
		_, err := os.Stat(filepath.Join("../..", f))
		require.NoError(t, err, "README.md's layout table names %s, which is not in the tree", f)
	}

	cmd := exec.Command("go", "list", "-f", "{{.Dir}}", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err)
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		require.NoError(t, err)
		rel = filepath.ToSlash(rel) + "/"
		if strings.HasPrefix(rel, "gen/") {
			continue
		}
		covered := false
		for _, f := range folders {
			covered = covered || strings.HasPrefix(rel, f)
		}
		if !covered {
			t.Errorf("the package in %s has no row in README.md's layout table", rel)
		}
	}
}
