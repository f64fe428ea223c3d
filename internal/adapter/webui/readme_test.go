package webui_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// readmePrelude declares what the README snippets take from the reader's
// own app: a token source, a file input, a progress bar, a way to show an
// error, a file's id.
const readmePrelude = `declare function getToken(): string;
declare const input: HTMLInputElement;
declare const bar: { update(fraction: number): void };
declare function show(message: string, retryable: boolean): void;
declare const id: string;
`

var tsBlock = regexp.MustCompile("(?s)```ts\n(.*?)```")

// TestReadmeSnippetsCompile type-checks every TypeScript snippet of the
// client packages' READMEs as a reader's app would hold it: strict mode,
// in a module, against the packages' sources and the Uppy packages the
// development page installs (@uppy/core, @uppy/dashboard, @uppy/tus).
// A snippet that does not compile is a snippet a reader copies and cannot
// use.
func TestReadmeSnippetsCompile(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	tsc := filepath.Join(root, "clients/node_modules/.bin/tsc")
	_, err := os.Stat(tsc)
	require.NoError(t, err, "install the clients first: make ts")
	dir := t.TempDir()
	var files []string
	for _, readme := range []string{"clients/typescript/README.md", "clients/uppy/README.md"} {
		b, err := os.ReadFile(filepath.Join(root, readme))
		require.NoError(t, err)
		blocks := tsBlock.FindAllStringSubmatch(string(b), -1)
		require.NotEmpty(t, blocks, readme)
		for i, m := range blocks {
			name := fmt.Sprintf("%s-%d.ts", strings.ReplaceAll(filepath.Dir(readme), "/", "-"), i+1)
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(readmePrelude+m[1]+"\nexport {};\n"), 0o600))
			files = append(files, name)
		}
	}
	web := filepath.Join(root, "web/node_modules")
	config := map[string]any{
		"compilerOptions": map[string]any{
			"strict": true, "noEmit": true, "target": "es2022", "module": "esnext", "moduleResolution": "bundler",
			"lib": []string{"es2022", "dom", "dom.iterable"}, "skipLibCheck": true, "allowImportingTsExtensions": true,
			"types": []string{},
			// The packages from their sources; one copy of @uppy/core
			// for the app, the plugin and the other Uppy packages alike
			// (npm gives an app one: its peer dependency).
			"paths": map[string][]string{
				"@uploadedfile/client": {filepath.Join(root, "clients/typescript/src/index.ts")},
				"@uploadedfile/uppy":   {filepath.Join(root, "clients/uppy/src/index.ts")},
				"@uppy/core":           {filepath.Join(web, "@uppy/core/lib/index.d.ts")},
			},
		},
		"files": files,
	}
	// The app's node_modules: the development page's (Uppy, tus-js-client).
	require.NoError(t, os.Symlink(web, filepath.Join(dir, "node_modules")))
	b, err := json.Marshal(config)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tsconfig.json"), b, 0o600))
	cmd := exec.Command(tsc, "-p", dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the README snippets do not compile:\n%s", out)
}
