package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// TestRequestsKeepGenericPlans: on serve's requests' pool a statement is
// planned once without its arguments and that plan is kept from the first
// run (left to choose, PostgreSQL plans the first five runs with their
// arguments, and every run after for as long as the generic plan looks
// dearer); the sweeps' pool plans every run with its arguments; a
// plan_cache_mode in the URL wins.
func TestRequestsKeepGenericPlans(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	for _, tc := range []struct {
		name            string
		url             string
		limits          db.Limits
		generic, custom int
	}{
		{"requests", url, databaseConfig{}.requests(), 7, 0},
		{"sweeps", url, databaseConfig{}.sweeps(), 0, 7},
		{"maintenance", url, maintenanceLimits, 0, 7},
		{"requests, the URL's mode", pgtest.WithQuery(url, "plan_cache_mode=force_custom_plan"), databaseConfig{}.requests(), 0, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			pool, err := openPool(ctx, tc.url, nil, tc.limits)
			require.NoError(t, err)
			defer pool.Close()
			conn, err := pool.Acquire(ctx)
			require.NoError(t, err)
			defer conn.Release()
			for range 7 {
				_, err := db.New().FileListOwnerByCreated(ctx, conn, db.FileListOwnerByCreatedParams{
					TenantCode: "acme", UserID: "alice", AfterCreated: time.Now().Add(time.Hour), AfterID: uuid.Max, Max: 51,
				})
				require.NoError(t, err)
			}
			var generic, custom int
			require.NoError(t, conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
WHERE statement LIKE '-- name: FileListOwnerByCreated :many%'`).Scan(&generic, &custom))
			require.Equal(t, []int{tc.generic, tc.custom}, []int{generic, custom})
		})
	}
}
