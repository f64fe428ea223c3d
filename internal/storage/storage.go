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
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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
)

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
	Promote(ctx context.Context, src, dst, srcETag string) (ObjectInfo, error)
	// Delete removes the object; an absent object is not an error.
	Delete(ctx context.Context, key string) error
	// PresignPut returns a request that writes key with exactly the declared
	// size, type and checksum.
	PresignPut(ctx context.Context, key string, opts PresignPutOptions) (Presigned, error)
	// PresignGet returns a request that reads key.
	PresignGet(ctx context.Context, key string, opts PresignGetOptions) (Presigned, error)
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
	case strings.ContainsAny(key, "\\"):
		return fmt.Errorf("%w: backslash", ErrInvalidKey)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
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
