package db_test

// Reading the plans TestQueryPlansUseIndexes collects: which queries
// db/queries declares, and what a JSON plan scans, reads and sorts.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// declaredQueries lists the names declared in db/queries/*.sql.
func declaredQueries(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, q := range queryTexts(t) {
		names = append(names, q.name)
	}
	return names
}

// queryText is one query of db/queries: its file, its name, and its text
// from its "-- name:" line to the next one.
type queryText struct{ file, name, sql string }

// queryTexts reads every query declared in db/queries/*.sql.
func queryTexts(t *testing.T) []queryText {
	t.Helper()
	files, err := filepath.Glob("queries/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	re := regexp.MustCompile(`(?m)^-- name: (\w+) :`)
	var out []queryText
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		text := string(b)
		starts := re.FindAllStringSubmatchIndex(text, -1)
		for i, m := range starts {
			end := len(text)
			if i+1 < len(starts) {
				end = starts[i+1][0]
			}
			out = append(out, queryText{file: f, name: text[m[2]:m[3]], sql: text[m[0]:end]})
		}
	}
	return out
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// seqScans returns the relation of every Seq Scan node in a JSON plan.
func seqScans(v any) []string {
	var out []string
	switch n := v.(type) {
	case []any:
		for _, c := range n {
			out = append(out, seqScans(c)...)
		}
	case map[string]any:
		if n["Node Type"] == "Seq Scan" {
			rel, _ := n["Relation Name"].(string)
			out = append(out, rel)
		}
		for _, c := range n {
			out = append(out, seqScans(c)...)
		}
	}
	return out
}

var indexName = regexp.MustCompile(`"Index Name": "(\w+)"`)

func indexesUsed(plan string) []string {
	var out []string
	for _, m := range indexName.FindAllStringSubmatch(plan, -1) {
		out = append(out, m[1])
	}
	return out
}

// wastefulFilters describes every scan of a table (in a plan run by
// EXPLAIN ANALYZE) whose filter removed at least 1,000 rows and more than
// ten times the rows it returned. (Join filters between the CTEs of one
// statement compare rows already read; they are not counted.)
func wastefulFilters(v any) []string {
	var out []string
	switch n := v.(type) {
	case []any:
		for _, c := range n {
			out = append(out, wastefulFilters(c)...)
		}
	case map[string]any:
		loops, _ := n["Actual Loops"].(float64)
		rows, _ := n["Actual Rows"].(float64)
		removed, _ := n["Rows Removed by Filter"].(float64)
		if table, ok := n["Relation Name"].(string); ok && removed*max(loops, 1) >= 1000 && removed > 10*(rows+1) {
			out = append(out, fmt.Sprintf("its filter on %s (%v, %v) removed %.0f rows for %.0f returned, %.0f loops", table, n["Node Type"], n["Index Name"], removed, rows, loops))
		}
		for _, c := range n {
			out = append(out, wastefulFilters(c)...)
		}
	}
	return out
}

// customPlanQueries are the queries of db/queries marked "Plan: custom.":
// run only on pools that plan each statement with its arguments.
func customPlanQueries(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("queries/*.sql")
	require.NoError(t, err)
	out := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		name := ""
		for _, line := range strings.Split(string(b), "\n") {
			if m := queryName.FindStringSubmatch(line); m != nil {
				name = m[1]
			}
			if name != "" && strings.TrimSpace(line) == "-- Plan: custom." {
				out[name] = true
			}
		}
	}
	return out
}

// wastefulSorts lists the Sort nodes of a plan that sort at least 1,000
// rows and more than ten times what the whole statement returns: a query
// that walks and sorts a whole owner's or tenant's set for one page.
func wastefulSorts(nodes []any) []string {
	var out []string
	for _, root := range nodes {
		top, _ := root.(map[string]any)["Plan"].(map[string]any)
		returned, _ := top["Actual Rows"].(float64)
		var walk func(v any)
		walk = func(v any) {
			switch n := v.(type) {
			case []any:
				for _, c := range n {
					walk(c)
				}
			case map[string]any:
				if n["Node Type"] == "Sort" || n["Node Type"] == "Incremental Sort" {
					var in float64
					children, _ := n["Plans"].([]any)
					for _, c := range children {
						cm, _ := c.(map[string]any)
						rows, _ := cm["Actual Rows"].(float64)
						loops, _ := cm["Actual Loops"].(float64)
						in += rows * max(loops, 1)
					}
					if in >= 1000 && in > 10*(returned+1) {
						out = append(out, fmt.Sprintf("it sorts %.0f rows for %.0f returned", in, returned))
					}
				}
				for _, c := range n {
					walk(c)
				}
			}
		}
		walk(top)
	}
	return out
}

// TestWastefulFilters: the filter check flags a table scan that throws
// away most of what it reads, not one that keeps it, nor a join filter.
func TestWastefulFilters(t *testing.T) {
	var plan []any
	require.NoError(t, json.Unmarshal([]byte(`[{"Plan": {"Node Type": "Limit", "Plans": [
		{"Node Type": "Index Scan", "Relation Name": "uploaded_file", "Index Name": "i1", "Actual Rows": 10, "Actual Loops": 1, "Rows Removed by Filter": 5000},
		{"Node Type": "Index Scan", "Relation Name": "uploaded_file", "Index Name": "i2", "Actual Rows": 900, "Actual Loops": 1, "Rows Removed by Filter": 5000},
		{"Node Type": "Nested Loop", "Actual Rows": 10, "Actual Loops": 1, "Rows Removed by Join Filter": 9000}]}}]`), &plan))
	got := wastefulFilters(plan)
	require.Len(t, got, 1)
	require.Contains(t, got[0], "i1")
}
