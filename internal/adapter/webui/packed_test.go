package webui_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

// packedApps are the consumer apps of the pack test: each installs the
// packed tarballs beside its own Uppy major and bundles with its tool.
var packedApps = []struct {
	dir, uppy string
	build     []string // run in the app's folder
	// typecheck: the app and the READMEs' TypeScript snippets are
	// compiled with its strict tsconfig.json before it is bundled.
	typecheck bool
}{
	{dir: "esbuild-uppy6", uppy: "6.", build: []string{"node_modules/.bin/esbuild", "main.ts", "--bundle", "--format=esm", "--minify", "--outfile=dist/app.js", "--log-level=warning"}},
	{dir: "vite-uppy5", uppy: "5.", build: []string{"node_modules/.bin/vite", "build", "--logLevel", "warn"}, typecheck: true},
}

// TestPackedPackagesInChromium: @uploadedfile/client and @uploadedfile/uppy
// packed as they would be published (npm pack: their prepack builds them),
// installed from the tarballs into a fresh app (offline: the app's other
// dependencies are pinned in clients/pack-test), bundled with esbuild
// beside Uppy 6 and with Vite beside Uppy 5 -- one copy of @uppy/core in
// each bundle -- and run in headless Chromium: the upload goes through, on
// the local driver and on S3.
func TestPackedPackagesInChromium(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	tarballs := t.TempDir()
	pack := exec.Command("npm", "pack", "--workspaces", "--silent", "--pack-destination", tarballs)
	pack.Dir = clientsCopy(t, root)
	out, err := pack.CombinedOutput()
	require.NoError(t, err, "npm pack: %s", out)
	packed, err := filepath.Glob(filepath.Join(tarballs, "*.tgz"))
	require.NoError(t, err)
	require.Len(t, packed, 2, "both packages packed: %s", out)

	for _, app := range packedApps {
		dir := t.TempDir()
		run := func(name string, args ...string) {
			t.Helper()
			cmd := exec.Command(name, args...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s %v: %s", name, args, out)
		}
		// A fresh copy of the app, its pinned dependencies installed (make ts).
		_, err := os.Stat(filepath.Join(root, "clients/pack-test", app.dir, "node_modules"))
		require.NoError(t, err, "install the pack test's apps first: make ts")
		run("cp", "-a", filepath.Join(root, "clients/pack-test", app.dir)+"/.", dir)
		run("cp", "-a", filepath.Join(root, "clients/pack-test/app")+"/.", dir)
		// Offline with --legacy-peer-deps: on a fresh machine the npm cache
		// holds the app's tarballs but not @uppy/core's registry document,
		// which npm's peer resolution would fetch (only loopback here). The
		// peer range is checked after, against what is installed: npm ls
		// fails on a peer the app's @uppy/core does not satisfy.
		run("npm", append([]string{"install", "--offline", "--legacy-peer-deps", "--no-save", "--no-audit", "--no-fund", "--loglevel=error"}, packed...)...)
		ls := exec.Command("npm", "ls", "--offline", "@uppy/core")
		ls.Dir = dir
		tree, err := ls.CombinedOutput()
		require.NoError(t, err, "npm ls @uppy/core: %s", tree)
		require.Contains(t, string(tree), "@uploadedfile/uppy@", "%s", tree)
		require.Contains(t, string(tree), "deduped", "the plugin's peer is the app's own @uppy/core: %s", tree)
		require.NotContains(t, string(tree), "invalid", "%s", tree)
		if app.typecheck {
			writeSnippets(t, root, filepath.Join(dir, "snippets"))
			run("node_modules/.bin/tsc", "-p", ".")
		}
		run(app.build[0], app.build[1:]...)
		dist := filepath.Join(dir, "dist")
		if app.dir == "esbuild-uppy6" {
			html, err := os.ReadFile(filepath.Join(dir, "index.html"))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dist, "index.html"), bytes.ReplaceAll(html, []byte("./main.ts"), []byte("./app.js")), 0o600))
		}
		// One copy of Uppy's core: its locale's string appears once.
		var bundle []byte
		require.NoError(t, filepath.Walk(dist, func(p string, info os.FileInfo, err error) error {
			if err == nil && filepath.Ext(p) == ".js" {
				b, rerr := os.ReadFile(p)
				bundle = append(bundle, b...)
				return rerr
			}
			return err
		}))
		require.Equal(t, 1, bytes.Count(bundle, []byte("Failed to upload %{file}")), "%s: one @uppy/core in the bundle", app.dir)

		for _, driver := range []string{service.DriverLocal, service.DriverS3} {
			t.Run(app.dir+" on "+driver, func(t *testing.T) {
				t.Parallel()
				e := startPageEnv(t, driver, pageOptions{pageHandler: http.FileServer(http.Dir(dist))})
				var got struct {
					Version string
					Results []uploadOutcome
					Logs    []string
				}
				e.browse(t, "packed.mjs", &got)
				require.Regexp(t, "^"+app.uppy, got.Version, "the app runs its own Uppy major")
				require.Len(t, got.Results, 2, "%v", got.Logs)
				for _, r := range got.Results {
					require.Nil(t, r.Error, "%s: %s; %v", deref(r.Name), deref(r.Error), got.Logs)
					require.Equal(t, "ready", deref(r.Status))
					body := download(t, e.api, e.token, deref(r.ID))
					require.NotEmpty(t, body)
				}
			})
		}
	}
}

// writeSnippets writes every TypeScript block of the client's and the
// plugin's READMEs into dir, one module each, for the strict app to
// compile: what a reader pastes into a fresh Vite vanilla-ts app.
func writeSnippets(t *testing.T, root, dir string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o750))
	n := 0
	for _, readme := range []string{"clients/typescript/README.md", "clients/uppy/README.md"} {
		b, err := os.ReadFile(filepath.Join(root, readme))
		require.NoError(t, err)
		var block []string
		in := false
		for _, line := range strings.Split(string(b), "\n") {
			switch {
			case !in && line == "```ts":
				in, block = true, nil
			case in && line == "```":
				in = false
				n++
				name := fmt.Sprintf("%s-%d.ts", filepath.Base(filepath.Dir(readme)), n)
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(block, "\n")+"\n"), 0o600))
			case in:
				block = append(block, line)
			}
		}
	}
	require.GreaterOrEqual(t, n, 4, "the READMEs' TypeScript snippets were found")
}

// clientsCopy copies the clients workspace's sources (not their builds)
// into a temporary folder, with its installed node_modules linked, so the
// packs' prepack builds there and never rewrites the tree's builds other
// tests read meanwhile.
func clientsCopy(t *testing.T, root string) string {
	t.Helper()
	src, dst := filepath.Join(root, "clients"), t.TempDir()
	files := []string{"package.json", "package-lock.json",
		"typescript/package.json", "typescript/tsconfig.json", "typescript/README.md", "typescript/src", "typescript/test",
		"uppy/package.json", "uppy/tsconfig.json", "uppy/README.md", "uppy/src"}
	for _, f := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o750))
		out, err := exec.Command("cp", "-a", filepath.Join(src, f), filepath.Join(dst, f)).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	_, err := os.Stat(filepath.Join(src, "node_modules"))
	require.NoError(t, err, "install the clients workspace first: make ts")
	require.NoError(t, os.Symlink(filepath.Join(src, "node_modules"), filepath.Join(dst, "node_modules")))
	return dst
}
