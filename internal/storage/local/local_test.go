package local_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/servecontent"
	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
	"github.com/uploadedfile/uploadedfile/internal/testkit/storagetest"
)

// newStore returns a local store on a temp root whose presigned URLs are
// served by a loopback test server.
func newStore(t *testing.T) *local.Store { t.Helper(); return storagetest.Local(t) }

// readModes are the two ways the driver opens objects for reading: one
// openat2 with RESOLVE_BENEATH, and os.Root where openat2 is unavailable.
var readModes = []struct {
	name  string
	apply func(*local.Store)
}{
	{"openat2", func(*local.Store) {}},
	{"os.Root", local.UseOSRoot},
}

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, m := range readModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			storagetest.Run(t, func(t *testing.T) storage.Store { s := newStore(t); m.apply(s); return s })
		})
	}
}

func TestSymlinksCannotEscapeRoot(t *testing.T) {
	t.Parallel()
	for _, m := range readModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			m.apply(s)
			testSymlinksCannotEscapeRoot(t, s)
		})
	}
}

func testSymlinksCannotEscapeRoot(t *testing.T, s *local.Store) {
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600))

	// A directory symlink planted inside the root, pointing outside it.
	require.NoError(t, os.Symlink(outside, filepath.Join(s.Root(), "core")))
	_, err := s.Put(ctx, "core/new.txt", strings.NewReader("x"), storage.PutOptions{Size: 1})
	require.ErrorIs(t, err, storage.ErrInvalidKey)
	_, err = os.Stat(filepath.Join(outside, "new.txt"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing was written outside the root")
	_, err = s.Stat(ctx, "core/secret")
	require.ErrorIs(t, err, storage.ErrInvalidKey)
	_, err = s.Open(ctx, "core/secret", nil)
	require.ErrorIs(t, err, storage.ErrInvalidKey)
	require.ErrorIs(t, s.Delete(ctx, "core/secret"), storage.ErrInvalidKey)
	_, err = os.Stat(filepath.Join(outside, "secret"))
	require.NoError(t, err, "the outside file survives")

	// A file symlink pointing outside.
	require.NoError(t, os.MkdirAll(filepath.Join(s.Root(), "a"), 0o750))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(s.Root(), "a", "link")))
	_, err = s.Open(ctx, "a/link", nil)
	require.ErrorIs(t, err, storage.ErrInvalidKey)

	// A relative symlink climbing out, and one that stays inside.
	realOutside, err := filepath.EvalSymlinks(outside)
	require.NoError(t, err)
	up, err := filepath.Rel(filepath.Join(s.Root(), "a"), filepath.Join(realOutside, "secret"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(up, "../"), up)
	require.NoError(t, os.Symlink(up, filepath.Join(s.Root(), "a", "up")))
	_, err = s.Stat(ctx, "a/up")
	require.ErrorIs(t, err, storage.ErrInvalidKey)
	inside := putString(t, s, "b/real.txt", "inside")
	require.NoError(t, os.Symlink("../b/real.txt", filepath.Join(s.Root(), "a", "alias")))
	st, err := s.Stat(ctx, "a/alias")
	require.NoError(t, err, "a symlink that stays inside the root is followed, as os.Root does")
	require.Equal(t, inside.ETag, st.ETag)

	// Promotion onto or from an escaping path.
	oi := putString(t, s, "b/src.txt", "src")
	_, err = s.Promote(ctx, "b/src.txt", "core/dst.txt", oi.ETag, storage.PromoteOptions{})
	require.ErrorIs(t, err, storage.ErrInvalidKey)
}

func TestRootIsCanonical(t *testing.T) {
	t.Parallel()
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(real, link))
	s, err := local.New(local.Config{Root: filepath.Join(link, "upload")})
	require.NoError(t, err)
	defer s.Close()
	want, err := filepath.EvalSymlinks(real)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(want, "upload"), s.Root(), "absolute, symlinks resolved, created")
	fi, err := os.Stat(s.Root())
	require.NoError(t, err)
	require.True(t, fi.IsDir())

	_, err = local.New(local.Config{})
	require.ErrorContains(t, err, "localRoot is empty")
	_, err = local.New(local.Config{Root: t.TempDir(), PresignBaseURL: "http://x", PresignSecret: []byte("short")})
	require.ErrorContains(t, err, "at least 32 bytes")

	unsigned, err := local.New(local.Config{Root: t.TempDir()})
	require.NoError(t, err)
	defer unsigned.Close()
	_, err = unsigned.PresignGet(ctx, "a/b", storage.PresignGetOptions{Expires: time.Minute})
	require.ErrorIs(t, err, storage.ErrUnsupported)
}

// TestNoTemporaryFilesRemain: failed and successful writes leave only the
// objects themselves in the root.
func TestNoTemporaryFilesRemain(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	putString(t, s, "d/ok.txt", "fine")
	_, err := s.Put(ctx, "d/short.txt", strings.NewReader("abc"), storage.PutOptions{Size: 10})
	require.ErrorIs(t, err, storage.ErrPrecondition)
	_, err = s.Put(ctx, "d/ok.txt", strings.NewReader("dup"), storage.PutOptions{Size: 3})
	require.ErrorIs(t, err, storage.ErrExists)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Put(cctx, "d/cancelled.txt", strings.NewReader("abc"), storage.PutOptions{Size: 3})
	require.ErrorIs(t, err, context.Canceled)
	spoolString(t, s, "discarded").Close()
	refused := spoolString(t, s, "refused")
	_, err = refused.Commit(ctx, "d/refused.txt", storage.PutOptions{Size: 3})
	require.ErrorIs(t, err, storage.ErrPrecondition)
	_, err = refused.Commit(ctx, "d/ok.txt", storage.PutOptions{Size: 7})
	require.ErrorIs(t, err, storage.ErrExists)
	_, err = refused.Commit(cctx, "d/cancelled-spool.txt", storage.PutOptions{Size: 7})
	require.ErrorIs(t, err, context.Canceled)
	refused.Close()

	var files []string
	require.NoError(t, filepath.WalkDir(s.Root(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(s.Root(), p)
			files = append(files, rel)
		}
		return err
	}))
	require.Equal(t, []string{"d/ok.txt"}, files)
}

// TestPromoteIsAHardLink: local promotion shares the inode, so no byte is
// copied, and deleting the staging name keeps the final object.
func TestPromoteIsAHardLink(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	oi := putString(t, s, "s/staging.bin", "linked")
	_, err := s.Promote(ctx, "s/staging.bin", "f/final.bin", oi.ETag, storage.PromoteOptions{})
	require.NoError(t, err)
	a, err := os.Stat(filepath.Join(s.Root(), "s/staging.bin"))
	require.NoError(t, err)
	b, err := os.Stat(filepath.Join(s.Root(), "f/final.bin"))
	require.NoError(t, err)
	require.True(t, os.SameFile(a, b))
	require.NoError(t, s.Delete(ctx, "s/staging.bin"))
	st, err := s.Stat(ctx, "f/final.bin")
	require.NoError(t, err)
	require.Equal(t, oi.ETag, st.ETag)
}

// TestSpoolIsLinkedNotCopied: a buffer upload's spool on the local driver
// is an unnamed file in the root, and committing it links that very file:
// the bytes are written once.
func TestSpoolIsLinkedNotCopied(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	spoolDir := t.TempDir()
	sp, err := storage.NewSpool(ctx, s, spoolDir)
	require.NoError(t, err)
	defer sp.Close()
	f := local.SpoolFile(sp)
	require.NotNil(t, f, "NewSpool picks the driver's own spool")
	_, err = sp.Write([]byte("written once"))
	require.NoError(t, err)
	spooled, err := f.Stat()
	require.NoError(t, err)
	entries, err := os.ReadDir(s.Root())
	require.NoError(t, err)
	require.Empty(t, entries, "an uncommitted spool has no name")

	committed, err := sp.Commit(ctx, "l/linked.txt", storage.PutOptions{ContentType: "text/plain", Size: 12})
	require.NoError(t, err)
	stat, err := s.Stat(ctx, "l/linked.txt")
	require.NoError(t, err)
	require.Equal(t, stat, committed, "the commit answers what reading the object back does")
	object, err := os.Stat(filepath.Join(s.Root(), "l/linked.txt"))
	require.NoError(t, err)
	require.True(t, os.SameFile(spooled, object), "the object is the spool's inode, not a copy")
	empty, err := os.ReadDir(spoolDir)
	require.NoError(t, err)
	require.Empty(t, empty, "nothing went through the spool directory")
}

func spoolString(t *testing.T, s *local.Store, body string) storage.Spool {
	t.Helper()
	sp, err := s.Spool(ctx)
	require.NoError(t, err)
	_, err = sp.Write([]byte(body))
	require.NoError(t, err)
	return sp
}

var ctx = context.Background()

func putString(t *testing.T, s *local.Store, key, body string) storage.ObjectInfo {
	t.Helper()
	oi, err := s.Put(ctx, key, strings.NewReader(body), storage.PutOptions{ContentType: "text/plain", Size: int64(len(body))})
	require.NoError(t, err)
	return oi
}

// TestSignedGetBoundsRangesAndSandboxes: the signed GET handler refuses
// more than servecontent.MaxRanges ranges and overlapping ones with 416
// (tens of thousands of one-byte ranges used to answer about twelve times
// the object), serves a few sorted ones, and sandboxes what it serves.
func TestSignedGetBoundsRangesAndSandboxes(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	body := bytes.Repeat([]byte("0123456789"), 10)
	_, err := s.Put(ctx, "t/ranged.txt", bytes.NewReader(body), storage.PutOptions{ContentType: "text/plain", Size: int64(len(body))})
	require.NoError(t, err)
	p, err := s.PresignGet(ctx, "t/ranged.txt", storage.PresignGetOptions{Expires: time.Minute})
	require.NoError(t, err)
	get := func(rng string) (*http.Response, []byte) {
		req, err := http.NewRequest(http.MethodGet, p.URL, nil)
		require.NoError(t, err)
		req.Header.Set("Range", rng)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}
	ones := make([]string, 20000)
	for i := range ones {
		ones[i] = fmt.Sprintf("%d-%d", i%100, i%100)
	}
	for _, rng := range []string{"bytes=" + strings.Join(ones, ","), "bytes=0-9,5-14", "bytes=50-59,0-9"} {
		resp, b := get(rng)
		require.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.StatusCode, rng[:min(len(rng), 40)])
		require.Equal(t, "bytes */100", resp.Header.Get("Content-Range"))
		require.Less(t, len(b), 200)
	}
	resp, b := get("bytes=0-9,50-59")
	require.Equal(t, http.StatusPartialContent, resp.StatusCode)
	require.Less(t, len(b), len(body)+2*servecontent.MaxRanges*100, "the parts and their headers")
	require.Equal(t, servecontent.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "cross-origin", resp.Header.Get("Cross-Origin-Resource-Policy"))
}

// Ping answers while localRoot is the directory the store opened, and
// fails -- unavailable -- once the path names another one (a volume
// unmounted or a directory replaced under a running server).
func TestPingSeesTheRootReplaced(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	root := filepath.Join(parent, "files")
	require.NoError(t, os.Mkdir(root, 0o700))
	s, err := local.New(local.Config{Root: root})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Ping(context.Background()))

	require.NoError(t, os.Rename(root, filepath.Join(parent, "moved")))
	require.NoError(t, os.Mkdir(root, 0o700))
	err = s.Ping(context.Background())
	require.ErrorIs(t, err, storage.ErrUnavailable)

	require.NoError(t, os.Remove(root))
	require.ErrorIs(t, s.Ping(context.Background()), storage.ErrUnavailable)
}
