// Package layers holds the test of the tree's layering: which folders may
// import which (README.md, "Layout").
package layers

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/uploadedfile/uploadedfile"

// pkg is what go list says of one package.
type pkg struct {
	ImportPath                         string
	Imports, TestImports, XTestImports []string
}

// kind places a package of this module in its layer.
func kind(path string) string {
	rel := strings.TrimPrefix(path, module+"/")
	switch {
	case strings.HasPrefix(rel, "internal/adapter/"):
		return "adapter"
	case strings.HasPrefix(rel, "internal/testkit/"):
		return "testkit"
	case strings.HasPrefix(rel, "internal/"):
		return "component"
	case rel == "service":
		return "service"
	case strings.HasPrefix(rel, "gen/"):
		return "generated"
	}
	return "entry" // cmd/, bench/, uploader/, db/: programs, tools, clients, the SQL's tests
}

// TestLayers: calls go one way. Components (internal/ outside adapter/ and
// testkit/) import neither service nor an adapter; service imports no
// adapter; the code that ships imports no test kit (depguard holds the same
// for make verify). Tests may reach across (a service test runs the sweeps
// through the tracks adapter). Adapters and components never share a
// parent folder: the folder says the layer.
func TestLayers(t *testing.T) {
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err)
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		seen++
		from := kind(p.ImportPath)
		check := func(imports []string, test bool) {
			for _, imp := range imports {
				if !strings.HasPrefix(imp, module+"/") {
					continue
				}
				to := kind(imp)
				switch {
				case !test && from == "component" && (to == "service" || to == "adapter"):
					t.Errorf("%s (a component) imports %s (%s): components are what service uses", p.ImportPath, imp, to)
				case !test && from == "service" && to == "adapter":
					t.Errorf("service imports the adapter %s", imp)
				case !test && to == "testkit" && from != "testkit" && from != "entry":
					t.Errorf("%s ships with the test kit %s", p.ImportPath, imp)
				}
			}
		}
		check(p.Imports, false)
		check(append(p.TestImports, p.XTestImports...), true)
	}
	require.Greater(t, seen, 20, "go list saw the module's packages")
}

// TestFileLengths: no Go file outside gen/ (generated) is over 800 lines,
// so that one can be read whole; functions are held to 80 lines by
// golangci-lint's funlen in make verify.
func TestFileLengths(t *testing.T) {
	cmd := exec.Command("git", "ls-files", "*.go")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	require.NoError(t, err)
	files := strings.Fields(string(out))
	require.Greater(t, len(files), 100, "git listed the module's Go files")
	for _, f := range files {
		if strings.HasPrefix(f, "gen/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("../..", f))
		require.NoError(t, err)
		if n := strings.Count(string(b), "\n"); n > 800 {
			t.Errorf("%s has %d lines (at most 800: split it by what its parts do)", f, n)
		}
	}
}
