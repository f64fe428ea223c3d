package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// benchTable is a run's table as report.markdown writes it.
func benchTable(commit, day string, rows ...row) string {
	r := report{rows: rows}
	text := r.markdown("make bench")
	i := strings.Index(text, " on ")
	j := strings.Index(text, ". ")
	return text[:i] + " on " + day + " 10:00 UTC at commit " + commit + text[j:]
}

// TestHistoryKeepsTheLastThreeRuns: each write of the report keeps the
// judged rows' figures of the run it writes and of the two before it --
// the first time from the table it replaces -- drops older runs and rows
// the bench no longer has, and leaves the rest of the document alone.
func TestHistoryKeepsTheLastThreeRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "performance.md")
	first := benchTable("aaa1111", "2026-11-01",
		row{"download 64 KiB", "0.83× (worst 0.7× of 5)", "≥ 0.9×", false},
		row{"a retired row", "1.10×", "≤ 1.2×", true},
		row{"for the record", "2.00×", "", true})
	require.NoError(t, os.WriteFile(path, []byte("# Performance\n\n<!-- bench:begin -->\n"+first+"<!-- bench:end -->\n\nprose\n"), 0o644))

	for i, commit := range []string{"bbb2222", "ccc3333", "ddd4444"} {
		rows := []row{
			{"download 64 KiB", []string{"0.91× (worst 0.8× of 5)", "0.88×", "0.95×"}[i], "≥ 0.9×", i != 1},
			{"list vs its floor", "0.86×", "≥ 0.85×", true},
			{"for the record", "2.10×", "", true},
		}
		require.NoError(t, writeWithHistory(path, benchTable(commit, "2026-11-2"+string(rune('1'+i)), rows...), rows))
	}
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	history := section(string(doc), "bench-history")
	require.Equal(t, `| key row | target | bbb2222 (2026-11-21) | ccc3333 (2026-11-22) | ddd4444 (2026-11-23) |
|---|---|---|---|---|
| download 64 KiB | ≥ 0.9× | 0.91× | 0.88× short | 0.95× |
| list vs its floor | ≥ 0.85× | 0.86× | 0.86× | 0.86× |
`, strings.TrimPrefix(history, "\n"))
	require.Contains(t, string(doc), "ddd4444", "the latest table")
	require.NotContains(t, section(string(doc), "bench"), "ccc3333", "one table: the latest")
	require.Contains(t, string(doc), "\nprose\n")

	// After the first write, the replaced table's run was the oldest.
	one := t.TempDir() + "/p.md"
	require.NoError(t, os.WriteFile(one, []byte("<!-- bench:begin -->\n"+first+"<!-- bench:end -->\n"), 0o644))
	rows := []row{{"download 64 KiB", "0.92×", "≥ 0.9×", true}}
	require.NoError(t, writeWithHistory(one, benchTable("bbb2222", "2026-11-21", rows...), rows))
	doc, err = os.ReadFile(one)
	require.NoError(t, err)
	require.Contains(t, string(doc), "| download 64 KiB | ≥ 0.9× | 0.83× short | 0.92× |")
}
