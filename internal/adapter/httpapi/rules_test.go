package httpapi

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ruleConst is a rule constant's declaration: RuleX = "area.name".
var ruleConst = regexp.MustCompile(`(?m)^\s*[Rr]ule\w* += "([a-z0-9]+\.[a-z0-9-]+)"`)

// docRule is a rule named in docs/http.md: a backticked area.name of one
// of the rules' areas.
var docRule = regexp.MustCompile("`((?:name|type|size|content|zip|multipart|quota|variant|scan|storage)\\.[a-z0-9-]+)`")

// TestRuleCatalogue: the problem catalogue is one table. Every rule the
// code declares (filecheck, service, this package) has its words in
// ruleSentences and its row in docs/http.md; every rule docs/http.md
// names, and every rule with words, is one the code declares.
func TestRuleCatalogue(t *testing.T) {
	var code []string
	for _, dir := range []string{"../../filecheck", "../../../service", "."} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range ruleConst.FindAllStringSubmatch(string(b), -1) {
				if !slices.Contains(code, m[1]) {
					code = append(code, m[1])
				}
			}
		}
	}
	require.Greater(t, len(code), 40, "the code's rules were found")
	doc, err := os.ReadFile("../../../docs/http.md")
	require.NoError(t, err)
	var documented []string
	for _, m := range docRule.FindAllStringSubmatch(string(doc), -1) {
		documented = append(documented, m[1])
	}
	for _, r := range code {
		if _, ok := ruleSentences[r]; !ok {
			t.Errorf("rule %s has no words in ruleSentences", r)
		}
		if !slices.Contains(documented, r) {
			t.Errorf("rule %s is not in docs/http.md", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(code, r) {
			t.Errorf("docs/http.md names %s, which the code does not declare", r)
		}
	}
	for r, s := range ruleSentences {
		require.Contains(t, code, r, "ruleSentences has words for %s, which the code does not declare", r)
		require.True(t, strings.HasSuffix(s, "."), "%s: a sentence: %q", r, s)
	}
}
