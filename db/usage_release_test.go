package db_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The usage release is written once (uploaded_file_usage_release, issue
// 47): no query in db/queries lowers uploaded_file_usage itself, and every
// query that calls the function reads the CTE that calls it in its final
// SELECT -- an unread SELECT CTE is never run, and the space would stay
// counted.
func TestUsageReleasedInOnePlace(t *testing.T) {
	t.Parallel()
	callers := 0
	for _, q := range queryTexts(t) {
		if strings.Contains(q.sql, "UPDATE uploaded_file_usage") {
			require.Equal(t, "UsageRecount", q.name, "%s: %s updates uploaded_file_usage itself; release space with uploaded_file_usage_release", q.file, q.name)
		}
		if !strings.Contains(q.sql, "uploaded_file_usage_release(") {
			continue
		}
		callers++
		require.Regexp(t, `(?m)^SELECT \w+\.\* FROM \w+ CROSS JOIN released;\s*$`, q.sql,
			"%s: %s calls uploaded_file_usage_release in a CTE its final SELECT does not read", q.file, q.name)
	}
	require.Equal(t, 12, callers, "the transitions out of \"holds space\" (docs/schema.md)")
}

// uploaded_file_usage_release gives each row's bytes (and files_each
// files) back to its owner and its tenant's total, never below zero, and
// touches nothing for no rows.
func TestUsageReleaseFunction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.pool.Exec(b.ctx, `INSERT INTO uploaded_file_usage (tenant_code, user_id, bytes, files) VALUES
		('t1', '', 1000, 10), ('t1', 'ann', 600, 6), ('t1', 'bob', 400, 4), ('t2', '', 50, 1), ('t2', 'cy', 50, 1)`)
	require.NoError(t, err)
	usage := func() map[string][2]int64 {
		rows, err := b.pool.Query(b.ctx, `SELECT tenant_code || '/' || user_id, bytes, files FROM uploaded_file_usage`)
		require.NoError(t, err)
		defer rows.Close()
		out := map[string][2]int64{}
		for rows.Next() {
			var k string
			var bytes, files int64
			require.NoError(t, rows.Scan(&k, &bytes, &files))
			out[k] = [2]int64{bytes, files}
		}
		require.NoError(t, rows.Err())
		return out
	}
	release := func(tenants, users []string, sizes []int64, filesEach int) int64 {
		var n int64
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT uploaded_file_usage_release($1, $2, $3, $4)`, tenants, users, sizes, filesEach).Scan(&n))
		return n
	}

	// Two of ann's files and one of bob's: 3 usage rows change.
	require.Equal(t, int64(3), release([]string{"t1", "t1", "t1"}, []string{"ann", "bob", "ann"}, []int64{100, 40, 200}, 1))
	require.Equal(t, map[string][2]int64{
		"t1/": {660, 7}, "t1/ann": {300, 4}, "t1/bob": {360, 3}, "t2/": {50, 1}, "t2/cy": {50, 1},
	}, usage())

	// A variant's bytes (no files); more than is counted stops at zero.
	require.Equal(t, int64(2), release([]string{"t2"}, []string{"cy"}, []int64{70}, 0))
	require.Equal(t, [2]int64{0, 1}, usage()["t2/cy"])
	require.Equal(t, [2]int64{0, 1}, usage()["t2/"])

	// No rows (a CTE over nothing aggregates NULL arrays): nothing changes.
	require.Equal(t, int64(0), release(nil, nil, nil, 1))
	require.Equal(t, [2]int64{660, 7}, usage()["t1/"])
}
