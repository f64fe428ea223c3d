// Package local is the local-disk storage driver.
//
// Every key is opened through an os.Root on the canonical localRoot, so no
// key -- nor a symlink planted inside the root -- can reach a file outside
// it. Put writes a temporary file in the target directory, fsyncs it, hard
// links it to the key (a link never overwrites) and fsyncs the directory:
// after Put returns the object survives a crash, and a crash during Put
// leaves nothing (the file is written unnamed, O_TMPFILE, and linked into
// place; a named temporary file is the fallback where O_TMPFILE is not
// supported). The SHA-256 and content type of each object are kept in
// extended attributes of its inode, so hard links (Promote) share them.
//
// Spool (storage.Spooler) receives a buffer upload the same way before its
// key is known: an unnamed file in the root, read back for the checks, then
// sealed and linked to its key by Commit -- the bytes are written once.
//
// Presigned requests are HMAC-signed URLs served by Handler, mounted at
// Config.PresignBaseURL.
package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/uploadedfile/uploadedfile/internal/storage"
)

const (
	xattrSHA256      = "user.uploadedfile.sha256"
	xattrContentType = "user.uploadedfile.content-type"
	tempPrefix       = ".uploadedfile-tmp-"
	dirPerm          = 0o750
	filePerm         = 0o640
)

// Config configures the local driver.
type Config struct {
	// Root is the directory objects live under; made absolute and
	// canonical (symlinks resolved) and created when missing.
	Root string
	// PresignBaseURL is the absolute URL Handler is served at; empty
	// disables presigning (ErrUnsupported).
	PresignBaseURL string
	// PresignSecret signs presigned URLs; at least 32 bytes when
	// PresignBaseURL is set.
	PresignSecret []byte
}

// Store is the local-disk driver.
type Store struct {
	root      *os.Root
	dir       *os.File // the root directory, for openat2 (openRead)
	noOpenat2 atomic.Bool
	rootPath  string
	cfg       Config
}

var (
	_ storage.Store      = (*Store)(nil)
	_ storage.FileOpener = (*Store)(nil)
)

// New opens (creating when missing) the root directory.
func New(cfg Config) (*Store, error) {
	if cfg.Root == "" {
		return nil, errors.New("local storage: localRoot is empty")
	}
	abs, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("local storage: localRoot: %w", err)
	}
	if err := os.MkdirAll(abs, dirPerm); err != nil {
		return nil, fmt.Errorf("local storage: create localRoot: %w", err)
	}
	canonical, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("local storage: localRoot: %w", err)
	}
	if cfg.PresignBaseURL != "" && len(cfg.PresignSecret) < 32 {
		return nil, errors.New("local storage: the presign secret must be at least 32 bytes")
	}
	root, err := os.OpenRoot(canonical)
	if err != nil {
		return nil, fmt.Errorf("local storage: open localRoot: %w", err)
	}
	dir, err := root.Open(".")
	if err != nil {
		_ = root.Close()
		return nil, fmt.Errorf("local storage: open localRoot: %w", err)
	}
	return &Store{root: root, dir: dir, rootPath: canonical, cfg: cfg}, nil
}

// Root returns the canonical absolute root directory.
func (s *Store) Root() string { return s.rootPath }

// Close releases the root directory.
func (s *Store) Close() error { return errors.Join(s.dir.Close(), s.root.Close()) }

// Kind implements storage.Store.
func (s *Store) Kind() storage.Kind { return storage.KindLocal }

// Ping implements storage.Store: localRoot's path still names the
// directory the store opened (not removed, replaced or unmounted from
// under it: writes would go to a directory nobody reads).
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	opened, err := s.root.Stat(".")
	if err != nil {
		return mapError(err)
	}
	now, err := os.Stat(s.rootPath)
	if err != nil || !os.SameFile(opened, now) {
		return fmt.Errorf("%w: localRoot %s is no longer the directory the store opened", storage.ErrUnavailable, s.rootPath)
	}
	return s.room()
}

// minFreeBytes is the room below which Ping reports the root full: less
// than one spool buffer cannot take an upload.
const minFreeBytes = 256 << 10

// room reports a root that is mounted read-only or has less than
// minFreeBytes free for an unprivileged writer.
func (s *Store) room() error {
	var st unix.Statfs_t
	if err := unix.Statfs(s.rootPath, &st); err != nil {
		return mapError(err)
	}
	if st.Flags&unix.ST_RDONLY != 0 {
		return fmt.Errorf("%w: localRoot %s is on a read-only filesystem", storage.ErrReadOnly, s.rootPath)
	}
	if free := st.Bavail * uint64(st.Bsize); free < minFreeBytes {
		return fmt.Errorf("%w: localRoot %s has %d bytes free", storage.ErrNoSpace, s.rootPath, free)
	}
	return nil
}

// Put implements storage.Store.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.ObjectInfo, error) {
	if err := storage.ValidateKey(key); err != nil {
		return storage.ObjectInfo{}, err
	}
	if opts.Size < 0 {
		return storage.ObjectInfo{}, fmt.Errorf("%w: negative size", storage.ErrInvalidArgument)
	}
	d, err := s.keyDir(key)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	defer func() { _ = d.Close() }()
	err = s.putUnnamed(ctx, d, path.Base(key), body, opts)
	if errors.Is(err, errNoTmpfile) {
		err = s.putNamed(ctx, path.Dir(key), key, body, opts)
	}
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	if err := d.Sync(); err != nil {
		return storage.ObjectInfo{}, mapError(err)
	}
	return s.Stat(ctx, key)
}

// keyDir opens the directory key lives in, creating it when missing. A new
// key's directory nearly always exists (one per tenant namespace), so it is
// opened first -- one openat2 -- and created only when that finds nothing:
// os.Root's MkdirAll and Open take an openat and a mkdirat per path
// segment, on every upload.
func (s *Store) keyDir(key string) (*os.File, error) {
	dir := path.Dir(key)
	d, err := s.openBeneath(dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if !errors.Is(err, storage.ErrNotFound) {
		return d, err
	}
	if err := s.root.MkdirAll(dir, dirPerm); err != nil {
		return nil, mapError(err)
	}
	return s.openBeneath(dir, unix.O_RDONLY|unix.O_DIRECTORY)
}

// errNoTmpfile: the file system cannot create unnamed files.
var errNoTmpfile = errors.New("local storage: O_TMPFILE unsupported")

// putUnnamed writes an unnamed file (O_TMPFILE) in the directory d and
// links it to name: a crash at any point leaves nothing behind, and the
// link never overwrites.
func (s *Store) putUnnamed(ctx context.Context, d *os.File, name string, body io.Reader, opts storage.PutOptions) error {
	f, err := openUnnamed(d, unix.O_WRONLY)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := fill(ctx, f, body, opts); err != nil {
		return err
	}
	return link(f, d, name)
}

// openUnnamed creates an unnamed file (O_TMPFILE) in the directory d, or
// answers errNoTmpfile where the file system cannot.
func openUnnamed(d *os.File, mode int) (*os.File, error) {
	fd, err := unix.Openat(int(d.Fd()), ".", unix.O_TMPFILE|mode|unix.O_CLOEXEC, filePerm)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
		return nil, errNoTmpfile
	}
	if err != nil {
		return nil, mapError(err)
	}
	return os.NewFile(uintptr(fd), "unnamed"), nil
}

// link gives the unnamed file f the name name in the directory d, never
// overwriting. It links the open inode by its /proc path: linkat with
// AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH. The target is a base name
// in d, so it cannot leave the root.
func link(f, d *os.File, name string) error {
	err := unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", f.Fd()), int(d.Fd()), name, unix.AT_SYMLINK_FOLLOW)
	if errors.Is(err, unix.EEXIST) {
		return storage.ErrExists
	}
	return mapError(err)
}

// putNamed is the fallback for file systems without O_TMPFILE: a named
// temporary file in the target directory, linked with no overwrite. A crash
// between its creation and its removal leaves a .uploadedfile-tmp-* file.
func (s *Store) putNamed(ctx context.Context, dir, key string, body io.Reader, opts storage.PutOptions) error {
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, tempPrefix+hex.EncodeToString(rnd[:]))
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return mapError(err)
	}
	defer s.root.Remove(tmp) //nolint:errcheck // gone once linked or on failure; best effort
	err = fill(ctx, f, body, opts)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = mapError(cerr)
	}
	if err != nil {
		return err
	}
	return mapError(s.root.Link(tmp, key))
}

// fill streams body into f, checking its size and checksum, then seals it.
func fill(ctx context.Context, f *os.File, body io.Reader, opts storage.PutOptions) error {
	h := sha256.New()
	buf := make([]byte, 256<<10)
	n, err := io.CopyBuffer(io.MultiWriter(f, h), io.LimitReader(contextReader{ctx, body}, opts.Size+1), buf)
	if err != nil {
		return fmt.Errorf("%w: local storage: write: %w", storage.DiskError(err), err)
	}
	sum := h.Sum(nil)
	if err := matches(n, sum, opts); err != nil {
		return err
	}
	return seal(f, sum, opts.ContentType)
}

// matches checks what was written against the declared size and checksum.
func matches(n int64, sum []byte, opts storage.PutOptions) error {
	if n != opts.Size {
		return fmt.Errorf("%w: %d bytes written, %d declared", storage.ErrPrecondition, n, opts.Size)
	}
	if opts.SHA256 != nil && !bytes.Equal(sum, opts.SHA256) {
		return fmt.Errorf("%w: SHA-256 does not match the declared checksum", storage.ErrPrecondition)
	}
	return nil
}

// seal records the checksum and content type in extended attributes of f
// and fsyncs it: the object is durable before it gets its name.
func seal(f *os.File, sum []byte, contentType string) error {
	if err := unix.Fsetxattr(int(f.Fd()), xattrSHA256, sum, 0); err != nil {
		return xattrError(err)
	}
	if err := unix.Fsetxattr(int(f.Fd()), xattrContentType, []byte(contentType), 0); err != nil {
		return xattrError(err)
	}
	if err := f.Sync(); err != nil {
		return mapError(err)
	}
	return nil
}

// Stat implements storage.Store.
func (s *Store) Stat(_ context.Context, key string) (storage.ObjectInfo, error) {
	if err := storage.ValidateKey(key); err != nil {
		return storage.ObjectInfo{}, err
	}
	f, err := s.openRead(key)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	defer func() { _ = f.Close() }()
	return info(key, f)
}

func info(key string, f *os.File) (storage.ObjectInfo, error) {
	oi, err := infoUntyped(key, f, "")
	if err != nil {
		return oi, err
	}
	ct, _ := getxattr(f, xattrContentType)
	oi.ContentType = string(ct)
	return oi, nil
}

// infoUntyped is info without the content type (one extended attribute
// read fewer, for a download, whose type comes from the file's row), and
// without the checksum when the caller knows the object's etag.
func infoUntyped(key string, f *os.File, etag string) (storage.ObjectInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return storage.ObjectInfo{}, mapError(err)
	}
	if !fi.Mode().IsRegular() {
		return storage.ObjectInfo{}, storage.ErrNotFound
	}
	if etag != "" {
		return storage.ObjectInfo{Key: key, Size: fi.Size(), ETag: etag, LastModified: fi.ModTime()}, nil
	}
	sum, err := getxattr(f, xattrSHA256)
	if err != nil || len(sum) != sha256.Size {
		return storage.ObjectInfo{}, fmt.Errorf("local storage: %s has no checksum attribute; it was not written by this driver", key)
	}
	return storage.ObjectInfo{Key: key, Size: fi.Size(), ETag: etagOf(sum), SHA256: sum, LastModified: fi.ModTime()}, nil
}

// etagOf is the ETag of an object of SHA-256 sum.
func etagOf(sum []byte) string { return `"` + hex.EncodeToString(sum[:16]) + `"` }

func getxattr(f *os.File, name string) ([]byte, error) {
	buf := make([]byte, 256)
	n, err := unix.Fgetxattr(int(f.Fd()), name, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// Open implements storage.Store.
func (s *Store) Open(_ context.Context, key string, rng *storage.Range) (io.ReadCloser, error) {
	f, _, err := s.OpenFile(key, "")
	if err != nil {
		return nil, err
	}
	if rng == nil {
		return f, nil
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, mapError(err)
	}
	if rng.Offset < 0 || rng.Offset >= fi.Size() {
		_ = f.Close()
		return nil, fmt.Errorf("%w: range offset %d outside an object of %d bytes", storage.ErrInvalidArgument, rng.Offset, fi.Size())
	}
	if _, err := f.Seek(rng.Offset, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, mapError(err)
	}
	if rng.Length < 0 {
		return f, nil
	}
	return readCloser{io.LimitReader(f, rng.Length), f}, nil
}

// OpenFile opens the object for reading with seeking (for http.ServeContent)
// and returns its metadata but its content type (ObjectInfo.ContentType is
// empty: a download serves the type its row records, and reading it here
// cost every download a system call); its Size is the open file's
// (fstat). A known etag (storage.FileOpener) spares reading the checksum
// attribute, another system call. The caller closes the file.
func (s *Store) OpenFile(key, etag string) (*os.File, storage.ObjectInfo, error) {
	if err := storage.ValidateKey(key); err != nil {
		return nil, storage.ObjectInfo{}, err
	}
	f, err := s.openRead(key)
	if err != nil {
		return nil, storage.ObjectInfo{}, err
	}
	oi, err := infoUntyped(key, f, etag)
	if err != nil {
		_ = f.Close()
		return nil, storage.ObjectInfo{}, err
	}
	return f, oi, nil
}

// Promote implements storage.Store: a hard link, after checking the source
// version; the link is verified afterwards too, so a source replaced between
// the check and the link is refused and the link removed. Public is ignored:
// local files are served by the service, never read anonymously.
func (s *Store) Promote(ctx context.Context, src, dst, srcETag string, _ storage.PromoteOptions) (storage.ObjectInfo, error) {
	if err := storage.ValidateKey(dst); err != nil {
		return storage.ObjectInfo{}, err
	}
	oi, err := s.Stat(ctx, src)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	if oi.ETag != srcETag {
		return storage.ObjectInfo{}, fmt.Errorf("%w: source version changed", storage.ErrPrecondition)
	}
	dir := path.Dir(dst)
	if err := s.root.MkdirAll(dir, dirPerm); err != nil {
		return storage.ObjectInfo{}, mapError(err)
	}
	if err := s.root.Link(src, dst); err != nil {
		return storage.ObjectInfo{}, mapError(err)
	}
	if err := s.syncDir(dir); err != nil {
		return storage.ObjectInfo{}, err
	}
	linked, err := s.Stat(ctx, dst)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	if linked.ETag != srcETag {
		_ = s.root.Remove(dst)
		return storage.ObjectInfo{}, fmt.Errorf("%w: source version changed", storage.ErrPrecondition)
	}
	return linked, nil
}

// Delete implements storage.Store.
func (s *Store) Delete(_ context.Context, key string) error {
	if err := storage.ValidateKey(key); err != nil {
		return err
	}
	if fi, err := s.root.Lstat(key); err == nil && fi.IsDir() {
		return fmt.Errorf("%w: %s is a directory", storage.ErrInvalidKey, key)
	}
	err := s.root.Remove(key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return mapError(err)
	}
	return s.syncDir(path.Dir(key))
}

func (s *Store) syncDir(dir string) error {
	d, err := s.root.Open(dir)
	if err != nil {
		return mapError(err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return mapError(err)
	}
	return nil
}

// mapError is the one place OS errors become storage errors.
func mapError(err error) error {
	switch {
	case err == nil:
		return nil
	case isEscape(err):
		return fmt.Errorf("%w: outside localRoot", storage.ErrInvalidKey)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return storage.ErrNotFound
	case errors.Is(err, fs.ErrExist):
		return storage.ErrExists
	default:
		return fmt.Errorf("%w: local storage: %w", storage.DiskError(err), err)
	}
}

// xattrError is a failed write of an object's attributes: the
// filesystem's own failure when it has one, else a root that does not
// support extended attributes.
func xattrError(err error) error {
	if kind := storage.DiskError(err); kind != storage.ErrUnavailable { //nolint:errorlint // DiskError returns one of the sentinels itself
		return fmt.Errorf("%w: local storage: %w", kind, err)
	}
	return fmt.Errorf("%w: local storage: localRoot must support extended attributes: %w", storage.ErrUnavailable, err)
}

// isEscape reports an os.Root refusal of a path leaving the root, wherever
// it sits in the chain (os.Root nests it inside PathErrors).
func isEscape(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

type readCloser struct {
	io.Reader
	io.Closer
}

// contextReader stops a copy when the context ends.
type contextReader struct {
	ctx context.Context
	r   io.Reader
}

func (c contextReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
