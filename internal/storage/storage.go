// Package storage is the small interface the service stores bytes through,
// with a local-disk driver (storage/local) and an S3 driver (storage/s3).
//
// Every driver keeps the same promises, checked by one conformance suite
// (storage/storagetest) against each of them:
//
//   - Put never overwrites: an existing key is ErrExists.
//   - Promote copies or links one object to a new key without streaming it
//     through the caller, only if the source is still the version the caller
//     verified (ErrPrecondition otherwise), and never overwrites (ErrExists).
//   - Delete is idempotent: an absent object counts as deleted.
//   - A Spool's Commit keeps Put's promises; NewSpool gives every store one,
//     the driver's own (no second copy) or a temporary file that is Put.
//   - Presigned requests are limited to MaxPresignLifetime, and a presigned
//     PUT lets the client write exactly the declared length, content type and
//     checksum, or nothing.
//
// Errors are the sentinels below, matched with errors.Is; each driver maps
// its own errors to them in one place. Driver errors never carry
// credentials or signed URLs.
package storage

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"
)

// Kind names a driver.
type Kind string

// The drivers.
const (
	KindLocal Kind = "local"
	KindS3    Kind = "s3"
)

// MaxPresignLifetime is the longest lifetime of any presigned request.
const MaxPresignLifetime = time.Hour

// MaxKeyLength bounds every key a driver accepts.
const MaxKeyLength = 1024

// Errors every driver maps its own failures to.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("storage: object not found")
	// ErrExists: the destination key already holds an object.
	ErrExists = errors.New("storage: object already exists")
	// ErrPrecondition: the source is not the version that was expected, or
	// the bytes written do not match the declared size or checksum.
	ErrPrecondition = errors.New("storage: precondition failed")
	// ErrInvalidKey: the key is not one a driver may use.
	ErrInvalidKey = errors.New("storage: invalid key")
	// ErrInvalidArgument: an option is out of bounds (e.g. a lifetime over
	// MaxPresignLifetime).
	ErrInvalidArgument = errors.New("storage: invalid argument")
	// ErrUnsupported: the driver cannot do this (e.g. presign without a
	// configured public base URL).
	ErrUnsupported = errors.New("storage: unsupported")
	// ErrUnavailable: the store did not answer, or failed for a reason that
	// is not the object's own state (a network error, a refused or
	// unreachable endpoint, wrong credentials, a missing bucket, a disk
	// error). Every error of a driver that is none of the sentinels above
	// wraps it; the same call can succeed once the store is back.
	ErrUnavailable = errors.New("storage: unavailable")
	// ErrBucketMissing: a probe found no bucket of the configured name
	// (wraps ErrUnavailable).
	ErrBucketMissing = fmt.Errorf("%w: the bucket does not exist", ErrUnavailable)
	// ErrCredentialsRefused: a probe's credentials were refused (wraps
	// ErrUnavailable).
	ErrCredentialsRefused = fmt.Errorf("%w: the credentials were refused", ErrUnavailable)
	// ErrNoSpace: the store has no room left -- a full disk or quota
	// (wraps ErrUnavailable).
	ErrNoSpace = fmt.Errorf("%w: no space left", ErrUnavailable)
	// ErrReadOnly: the store refuses writes -- a read-only filesystem
	// (wraps ErrUnavailable).
	ErrReadOnly = fmt.Errorf("%w: read-only", ErrUnavailable)
	// ErrIO: the device failed a read or a write (wraps ErrUnavailable).
	ErrIO = fmt.Errorf("%w: I/O error", ErrUnavailable)
)

// FaultKind names the kind of a store's failure for metrics, logs and
// problems: "no_space", "read_only", "io_error", "unavailable", or ""
// when err is none of them.
func FaultKind(err error) string {
	switch {
	case errors.Is(err, ErrNoSpace):
		return "no_space"
	case errors.Is(err, ErrReadOnly):
		return "read_only"
	case errors.Is(err, ErrIO):
		return "io_error"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	}
	return ""
}

// ObjectInfo is what a driver knows about a stored object.
type ObjectInfo struct {
	Key          string
	Size         int64
	ETag         string // the object version, as the driver reports it (quoted for S3)
	ContentType  string
	SHA256       []byte // nil when the driver does not know it
	LastModified time.Time
}

// PutOptions describe the object a Put writes.
type PutOptions struct {
	ContentType string
	// Size is the exact number of bytes the body holds; a body that is
	// shorter or longer fails with ErrPrecondition and leaves nothing behind.
	Size int64
	// SHA256, when set, is verified against the bytes written.
	SHA256 []byte
	// Public asks for a publicly readable object (S3 with publicAccessMode
	// object-acl sends the public-read ACL; otherwise ignored).
	Public bool
}

// PromoteOptions describe the object a Promote creates.
type PromoteOptions struct {
	// Public asks for a publicly readable object, as PutOptions.Public: a
	// copy does not keep the source's ACL, so it is asked for again.
	Public bool
}

// Range selects bytes [Offset, Offset+Length) of an object; Length < 0 reads
// to the end.
type Range struct {
	Offset int64
	Length int64
}

// PresignPutOptions describe what a presigned PUT allows the client to write.
type PresignPutOptions struct {
	ContentType string
	Size        int64
	SHA256      []byte // optional; when set the client must send it and the store verifies it
	Expires     time.Duration
}

// PresignGetOptions describe a presigned GET.
type PresignGetOptions struct {
	Expires time.Duration
	// ContentDisposition and ContentType, when set, are forced on the response.
	ContentDisposition string
	ContentType        string
}

// Presigned is a request a client can make without credentials of its own.
type Presigned struct {
	Method string
	URL    string
	// Header holds the headers the client must send exactly (they are signed).
	Header    http.Header
	ExpiresAt time.Time
}

// Store is the storage a service writes uploaded bytes to.
type Store interface {
	// Kind names the driver.
	Kind() Kind
	// Put writes a new object at key from body, never overwriting.
	Put(ctx context.Context, key string, body io.Reader, opts PutOptions) (ObjectInfo, error)
	// Stat returns the object's metadata.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// Open reads the object, or the given range of it (nil: all of it).
	Open(ctx context.Context, key string, rng *Range) (io.ReadCloser, error)
	// Promote makes dst an identical object to src, provided src's ETag is
	// still srcETag, without overwriting dst.
	Promote(ctx context.Context, src, dst, srcETag string, opts PromoteOptions) (ObjectInfo, error)
	// Delete removes the object; an absent object is not an error.
	Delete(ctx context.Context, key string) error
	// PresignPut returns a request that writes key with exactly the declared
	// size, type and checksum.
	PresignPut(ctx context.Context, key string, opts PresignPutOptions) (Presigned, error)
	// PresignGet returns a request that reads key.
	PresignGet(ctx context.Context, key string, opts PresignGetOptions) (Presigned, error)
	// List calls fn for every object whose key starts with prefix and,
	// when after is not empty, comes after it, in byte order of the keys
	// (the order S3 lists them in), until fn returns an error, which List
	// returns. A listing resumed after a key does not read what precedes
	// it again (S3's StartAfter; the local driver enters no directory that
	// holds only earlier keys). What a driver knows cheaply is filled in:
	// Key, Size and LastModified always; SHA-256 on the local driver; the
	// ETag on S3. Memory does not grow with the number of objects: S3 is
	// read a page at a time, a local directory's names one directory at a
	// time.
	List(ctx context.Context, prefix, after string, fn func(ObjectInfo) error) error
	// Ping checks that the store answers (readiness): the local root is
	// still a readable directory; the S3 bucket exists and the credentials
	// are accepted (ErrBucketMissing, ErrCredentialsRefused, ErrUnavailable).
	Ping(ctx context.Context) error
	// Close releases what the store holds (the local root's descriptors,
	// the S3 client's idle connections); the store is not used after it.
	Close() error
}

// ValidateKey refuses keys no driver may use: empty, longer than
// MaxKeyLength, not valid UTF-8, with control characters or backslashes,
// starting or ending with '/', or with an empty, "." or ".." segment.
// Drivers call it on every key they are given, whatever built it.
func ValidateKey(key string) error {
	switch {
	case key == "" || len(key) > MaxKeyLength:
		return fmt.Errorf("%w: length %d", ErrInvalidKey, len(key))
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not UTF-8", ErrInvalidKey)
	}
	// Byte by byte: in valid UTF-8 every byte of a multi-byte rune is at
	// least 0x80, so a control character or a backslash is its own byte.
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c == '\\':
			return fmt.Errorf("%w: backslash", ErrInvalidKey)
		case c < 0x20 || c == 0x7f:
			return fmt.Errorf("%w: control character", ErrInvalidKey)
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: empty, '.' or '..' segment", ErrInvalidKey)
		}
	}
	return nil
}

// CheckLifetime refuses a presign lifetime that is not positive or exceeds
// MaxPresignLifetime.
func CheckLifetime(d time.Duration) error {
	if d <= 0 || d > MaxPresignLifetime {
		return fmt.Errorf("%w: presign lifetime %s not in (0, %s]", ErrInvalidArgument, d, MaxPresignLifetime)
	}
	return nil
}

// Spool is an upload the store is receiving before its key is known: the
// caller writes the bytes once, reads them back at random offsets to check
// them, and then either commits them as the object at a key or closes the
// spool, which discards them. The spool hashes what is written, so the
// caller never hashes the bytes a second time. A Spool is used by one
// goroutine at a time.
type Spool interface {
	io.Writer
	io.ReaderAt
	// Size is the number of bytes written so far.
	Size() int64
	// SHA256 is the checksum of the bytes written so far.
	SHA256() []byte
	// Commit makes the bytes written the object at key, with Put's
	// promises: never overwriting (ErrExists), and ErrPrecondition when
	// opts.Size or opts.SHA256 do not match what was written. After a
	// successful Commit the spool accepts no more writes or commits.
	Commit(ctx context.Context, key string, opts PutOptions) (ObjectInfo, error)
	// Close releases the spool; bytes not committed are discarded.
	Close() error
}

// Spooler is implemented by a driver that can hold a spool itself and
// commit it without copying the bytes again (the local driver: an unnamed
// file in its root, linked into place). A driver or wrapper that cannot
// answers ErrUnsupported.
type Spooler interface {
	// Spool starts an empty spool, or answers ErrUnsupported.
	Spool(ctx context.Context) (Spool, error)
}

// FileOpener is implemented by a driver that can open an object as a
// seekable file (the local driver), so a download serves Range and
// conditional requests from it. The ObjectInfo it returns need not carry
// the content type (a download takes it from the file's row); its Size is
// the returned file's, read from the same descriptor (a download answers
// the size from it instead of seeking). etag, when not empty, is the
// object's ETag as the store reported it when the object was written (the
// file's row keeps it, a download grant carries it): objects are never
// rewritten under their key, so the driver answers it instead of reading
// it again (its SHA256 is then nil). A wrapper over a driver that cannot
// answers ErrUnsupported.
type FileOpener interface {
	OpenFile(key, etag string) (*os.File, ObjectInfo, error)
}

// NewSpool returns a spool for s: the driver's own when it has one,
// otherwise an unlinked temporary file in dir whose Commit is a Put.
func NewSpool(ctx context.Context, s Store, dir string) (Spool, error) {
	if sp, ok := s.(Spooler); ok {
		spool, err := sp.Spool(ctx)
		if !errors.Is(err, ErrUnsupported) {
			return spool, err
		}
	}
	f, err := os.CreateTemp(dir, "uploadedfile-spool-*")
	if err != nil {
		return nil, fmt.Errorf("storage: create spool file: %w", err)
	}
	// Unlinked at once: nothing is left behind, whatever happens next.
	_ = os.Remove(f.Name())
	return &fileSpool{SpoolFile: NewSpoolFile(f), store: s}, nil
}

// SpoolFile is what every spool shares: the bytes in a file, hashed and
// counted as they are written, and no more writes once committed. A
// driver's spool embeds it and adds Commit.
type SpoolFile struct {
	File      *os.File
	hash      hash.Hash
	size      int64
	committed bool
}

// NewSpoolFile spools into f, which must be empty and readable.
func NewSpoolFile(f *os.File) *SpoolFile { return &SpoolFile{File: f, hash: sha256.New()} }

// Write implements io.Writer, hashing what it writes.
func (f *SpoolFile) Write(p []byte) (int, error) {
	if f.committed {
		return 0, ErrSpoolCommitted
	}
	n, err := f.File.Write(p)
	f.hash.Write(p[:n])
	f.size += int64(n)
	if err != nil {
		err = fmt.Errorf("%w: spool: %w", DiskError(err), err)
	}
	return n, err
}

// DiskError is the sentinel of a filesystem's failure: ErrNoSpace (no
// space, or a quota), ErrReadOnly, ErrIO, or else ErrUnavailable.
func DiskError(err error) error {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return ErrNoSpace
	case errors.Is(err, syscall.EROFS):
		return ErrReadOnly
	case errors.Is(err, syscall.EIO):
		return ErrIO
	}
	return ErrUnavailable
}

// ReadAt implements io.ReaderAt.
func (f *SpoolFile) ReadAt(p []byte, off int64) (int, error) { return f.File.ReadAt(p, off) }

// Size is the number of bytes written.
func (f *SpoolFile) Size() int64 { return f.size }

// SHA256 is the checksum of the bytes written.
func (f *SpoolFile) SHA256() []byte { return f.hash.Sum(nil) }

// Close closes the file.
func (f *SpoolFile) Close() error { return f.File.Close() }

// Committed reports whether MarkCommitted was called.
func (f *SpoolFile) Committed() bool { return f.committed }

// MarkCommitted refuses further writes and commits: the bytes are an object.
func (f *SpoolFile) MarkCommitted() { f.committed = true }

// fileSpool is the spool of a store that cannot hold one: a temporary file,
// copied into the store by Put on Commit.
type fileSpool struct {
	*SpoolFile
	store Store
}

func (f *fileSpool) Commit(ctx context.Context, key string, opts PutOptions) (ObjectInfo, error) {
	if f.Committed() {
		return ObjectInfo{}, ErrSpoolCommitted
	}
	oi, err := f.store.Put(ctx, key, io.NewSectionReader(f.File, 0, f.Size()), opts)
	if err == nil {
		f.MarkCommitted()
	}
	return oi, err
}

// ErrSpoolCommitted is what a committed spool answers to more writes or
// commits, whatever the driver; it wraps ErrInvalidArgument.
var ErrSpoolCommitted = fmt.Errorf("%w: the spool is already committed", ErrInvalidArgument)
