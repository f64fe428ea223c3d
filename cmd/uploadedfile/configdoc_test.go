package main

import (
	"bytes"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigurationIsDocumented: docs/configuration.md documents every key
// the configuration model (fileConfig, the one place keys are declared)
// accepts, and no key it does not: a key added, renamed or removed without
// its row fails here.
func TestConfigurationIsDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/configuration.md")
	require.NoError(t, err)
	documented := documentedKeys(string(b))
	known := knownKeys(reflect.TypeFor[fileConfig](), "")
	for i, k := range known {
		known[i] = strings.ReplaceAll(k, ".*.", ".<name>.")
	}
	for _, k := range known {
		if !slices.Contains(documented, k) {
			t.Errorf("docs/configuration.md has no row for %s", k)
		}
	}
	for _, k := range documented {
		if !slices.Contains(known, k) {
			t.Errorf("docs/configuration.md documents %s, which the configuration does not accept", k)
		}
	}
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	keyShape   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9]*(\.(<name>|[a-zA-Z][a-zA-Z0-9]*))*$`)
)

// documentedKeys reads the keys named in the first cell of the tables'
// rows: `a.b.c`, and `.d` for a sibling of the cell's first key.
func documentedKeys(doc string) []string {
	var keys []string
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.SplitN(line[1:], "|", 2)[0]
		first := ""
		for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
			k := m[1]
			if strings.HasPrefix(k, ".") && first != "" {
				k = first[:strings.LastIndex(first, ".")] + k
			}
			if !keyShape.MatchString(k) {
				continue
			}
			if first == "" {
				first = k
			}
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// TestDatabasePrecedenceIsTheDocs: serve --help, the README and
// docs/configuration.md name the database URL's sources in the order the
// code tries them.
func TestDatabasePrecedenceIsTheDocs(t *testing.T) {
	sources := regexp.MustCompile(`--database-url|UPLOADEDFILE_DATABASE_URL|databaseUrl|\bDATABASE_URL`)
	want := []string{"--database-url", "UPLOADEDFILE_DATABASE_URL", "databaseUrl", "DATABASE_URL"}
	order := func(text string) []string {
		at := strings.Index(text, "--database-url")
		require.GreaterOrEqual(t, at, 0, "names --database-url: %s", text)
		return sources.FindAllString(text[at:min(len(text), at+400)], 4)
	}
	var help bytes.Buffer
	cmd := newRootCommand(&help, io.Discard)
	cmd.SetArgs([]string{"serve", "--help"})
	require.NoError(t, cmd.Execute())
	long, _, _ := strings.Cut(help.String(), "Usage:") // the description, not the flags
	require.Equal(t, want, order(long), "serve --help")
	for _, doc := range []string{"../../README.md", "../../docs/configuration.md"} {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		text := string(b)
		require.Equal(t, want, order(text[strings.Index(text, "database is `--database-url`"):]), doc)
	}
	require.Equal(t, want, order(databasePrecedence), "databasePrecedence")
}
