package httpapi_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestContractGeneratesClients: the generators other teams point at
// api/openapi.yaml -- orval's axios and fetch clients and
// @hey-api/openapi-ts -- each generate a client from it that strict
// TypeScript compiles (versions pinned in clients/codegen; make ts
// installs them). oapi-codegen (gen/) and openapi-typescript (the
// client's schema) are held fresh by make verify and compiled where they
// are used.
func TestContractGeneratesClients(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	root := filepath.Dir(strings.TrimSpace(string(out)))
	kit := filepath.Join(root, "clients", "codegen")
	_, err = os.Stat(filepath.Join(kit, "node_modules"))
	require.NoError(t, err, "install the generators first: make ts")

	dir := t.TempDir()
	for _, f := range []string{"package.json", "tsconfig.json"} {
		b, err := os.ReadFile(filepath.Join(kit, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o600))
	}
	require.NoError(t, os.Symlink(filepath.Join(kit, "node_modules"), filepath.Join(dir, "node_modules")))
	contract := filepath.Join(root, "api", "openapi.yaml")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(dir, "node_modules", ".bin", name), args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %v: %s", name, args, out)
	}
	run("orval", "--input", contract, "--output", "out/orval-axios/api.ts", "--client", "axios")
	run("orval", "--input", contract, "--output", "out/orval-fetch/api.ts", "--client", "fetch")
	run("openapi-ts", "--input", contract, "--output", "out/hey-api")
	for _, f := range []string{"out/orval-axios/api.ts", "out/orval-fetch/api.ts", "out/hey-api/sdk.gen.ts"} {
		_, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err, "%s was generated", f)
	}
	run("tsc", "-p", ".")
}
