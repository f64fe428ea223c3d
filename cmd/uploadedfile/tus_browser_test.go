package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/service"
)

// TestBrowserResumesAfterKill is a web developer's resumable upload: a
// 12 MiB file from the development page (@uppy/tus, 5 MiB chunks) in
// Chromium with the upload throttled to 1.5 MB/s; at about a third the
// server is SIGKILLed and started again on the same address. The page's
// own retries carry the upload on from the server's offset: the file is
// ready once, byte for byte, and the page sent at most the file plus one
// chunk. On the local driver and on S3 (MinIO).
func TestBrowserResumesAfterKill(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{service.DriverLocal, service.DriverS3} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			k := newKillFixture(t)
			cfg := "maxFileSizeBytes: 26214400\nauth:\n  hmacSecret: " + strings.Repeat("k", 40) + "\n"
			var bucket *awss3.Client
			var name string
			if driver == service.DriverS3 {
				srv, err := s3test.StartKind(s3test.MinIO)
				require.NoError(t, err)
				t.Cleanup(srv.Stop)
				c := srv.NewBucket(t)
				bucket, name = srv.Client(), c.Bucket
				cfg += fmt.Sprintf("driver: s3\nbucket: %s\nendpoint: %s\nregion: %s\nforcePathStyle: true\naccessId: %s\naccessKey: %s\n",
					c.Bucket, c.Endpoint, c.Region, srv.AccessKey, srv.SecretKey)
			} else {
				cfg += "localRoot: " + k.root + "\n"
			}
			require.NoError(t, os.WriteFile(k.cfgFile, []byte(cfg), 0o600))
			addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			server := startServeOn(t, k.dbURL, k.cfgFile, addr, "--dev")

			const size, chunk = 12 << 20, 5 << 20
			content := bytes.Repeat([]byte("id,name,amount,note\n"), size/20+1)[:size]
			path := filepath.Join(t.TempDir(), "big.csv")
			require.NoError(t, os.WriteFile(path, content, 0o600))

			var done struct {
				Done    bool
				Error   any
				URL     string
				Sent    int64
				Offsets []int64
				Logs    []string
			}
			killed := false
			tusNodeScript(t, "e2e/tus-resume.browser.mjs", []string{"UF_PAGE=" + server.base + "/", "UF_FILE=" + path, "UF_UPLOAD_BPS=1500000"}, func(line string) bool {
				var p struct{ Progress *struct{ Sent int64 } }
				if json.Unmarshal([]byte(line), &p) == nil && p.Progress != nil && !killed && p.Progress.Sent >= size/3 {
					require.Less(t, p.Progress.Sent, int64(size), "killed part way")
					require.NoError(t, server.cmd.Process.Kill())
					_ = server.cmd.Wait()
					killed = true
					server = startServeOn(t, k.dbURL, k.cfgFile, addr, "--dev")
				}
				if strings.Contains(line, `"done":true`) {
					require.NoError(t, json.Unmarshal([]byte(line), &done))
				}
				return false
			})
			require.True(t, killed, "the server was killed mid-upload")
			require.True(t, done.Done)
			require.Nil(t, done.Error, "the upload finished: %v", done.Logs)
			t.Logf("%s: %d bytes sent for a %d-byte file, in %d PATCHes at offsets %v", driver, done.Sent, size, len(done.Offsets), done.Offsets)
			require.GreaterOrEqual(t, done.Sent, int64(size))
			require.LessOrEqual(t, done.Sent, int64(size+chunk), "at most the file plus one chunk")

			require.Equal(t, 1, k.count("SELECT count(*) FROM uploaded_file"), "one upload, one file")
			var status, key string
			require.NoError(t, k.conn.QueryRow(t.Context(), "SELECT status, key FROM uploaded_file").Scan(&status, &key))
			require.Equal(t, "ready", status)
			require.True(t, strings.HasSuffix(done.URL, "/uploaded-file/tus/"+idOf(t, k)), done.URL)
			var stored []byte
			if driver == service.DriverS3 {
				obj, err := bucket.GetObject(context.Background(), &awss3.GetObjectInput{Bucket: &name, Key: &key})
				require.NoError(t, err)
				stored, err = io.ReadAll(obj.Body)
				require.NoError(t, err)
				require.NoError(t, obj.Body.Close())
			} else {
				var err error
				stored, err = os.ReadFile(filepath.Join(k.root, key))
				require.NoError(t, err)
			}
			require.Equal(t, content, stored, "byte for byte")
		})
	}
}

// idOf is the id of the one file of k's database.
func idOf(t *testing.T, k *killFixture) string {
	t.Helper()
	var id string
	require.NoError(t, k.conn.QueryRow(t.Context(), "SELECT id::text FROM uploaded_file").Scan(&id))
	return id
}
