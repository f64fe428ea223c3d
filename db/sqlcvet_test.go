package db_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// TestSqlcVet runs `sqlc vet` with sqlc.yaml's rules against a database
// the migrations built: every query is prepared there (sqlc/db-prepare:
// the functions, casts and columns the real schema has, which generation
// checks only against its parse of the migrations), and no statement that
// writes file or usage rows hides how many it changed
// (file-writes-tell-rows).
func TestSqlcVet(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "tool", "-modfile=tools/go.mod", "sqlc", "vet")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "UPLOADEDFILE_SQLC_DATABASE_URL="+pgtest.NewDatabase(t))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "sqlc vet:\n%s", out)
}
