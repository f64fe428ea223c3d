package local

import (
	"context"
	"crypto/sha256"
	"errors"
	"hash"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// Spool implements storage.Spooler: the bytes are written once, to an
// unnamed file (O_TMPFILE) in localRoot, and Commit links that file into
// place -- no second copy and no second hash. Until then the file has no
// name, so a crash or a refused upload leaves nothing behind. Where the file
// system cannot create unnamed files it answers storage.ErrUnsupported.
func (s *Store) Spool(ctx context.Context) (storage.Spool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d, err := s.root.Open(".")
	if err != nil {
		return nil, mapError(err)
	}
	defer d.Close()
	f, err := openUnnamed(d, unix.O_RDWR)
	if errors.Is(err, errNoTmpfile) {
		return nil, storage.ErrUnsupported
	}
	if err != nil {
		return nil, err
	}
	return &spool{store: s, file: f, hash: sha256.New()}, nil
}

// spool is an unnamed file in localRoot being written.
type spool struct {
	store     *Store
	file      *os.File
	hash      hash.Hash
	size      int64
	committed bool
}

var _ storage.Spool = (*spool)(nil)

func (sp *spool) Write(p []byte) (int, error) {
	if sp.committed {
		return 0, storage.ErrSpoolCommitted
	}
	n, err := sp.file.Write(p)
	sp.hash.Write(p[:n])
	sp.size += int64(n)
	if err != nil {
		return n, mapError(err)
	}
	return n, nil
}

func (sp *spool) ReadAt(p []byte, off int64) (int, error) { return sp.file.ReadAt(p, off) }
func (sp *spool) Size() int64                             { return sp.size }
func (sp *spool) SHA256() []byte                          { return sp.hash.Sum(nil) }

// Close releases the file; an uncommitted one had no name and is gone.
func (sp *spool) Close() error { return sp.file.Close() }

// Commit checks what was written against opts, seals the file (checksum
// and type attributes, fsync), links it to key without overwriting and
// fsyncs the directory.
func (sp *spool) Commit(ctx context.Context, key string, opts storage.PutOptions) (storage.ObjectInfo, error) {
	if sp.committed {
		return storage.ObjectInfo{}, storage.ErrSpoolCommitted
	}
	if err := ctx.Err(); err != nil {
		return storage.ObjectInfo{}, err
	}
	if err := storage.ValidateKey(key); err != nil {
		return storage.ObjectInfo{}, err
	}
	sum := sp.SHA256()
	if err := matches(sp.size, sum, opts); err != nil {
		return storage.ObjectInfo{}, err
	}
	d, err := sp.store.keyDir(key)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	defer d.Close()
	if err := seal(sp.file, sum, opts.ContentType); err != nil {
		return storage.ObjectInfo{}, err
	}
	if err := link(sp.file, d, path.Base(key)); err != nil {
		return storage.ObjectInfo{}, err
	}
	sp.committed = true
	if err := d.Sync(); err != nil {
		return storage.ObjectInfo{}, mapError(err)
	}
	return sp.store.Stat(ctx, key)
}
