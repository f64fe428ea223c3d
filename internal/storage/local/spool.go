package local

import (
	"context"
	"errors"
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
	f, err := openUnnamed(s.dir, unix.O_RDWR)
	if errors.Is(err, errNoTmpfile) {
		return nil, storage.ErrUnsupported
	}
	if err != nil {
		return nil, err
	}
	return &spool{SpoolFile: storage.NewSpoolFile(f), store: s}, nil
}

// spool is an unnamed file in localRoot being written; closing it
// uncommitted frees it, as it never had a name.
type spool struct {
	*storage.SpoolFile
	store *Store
}

var _ storage.Spool = (*spool)(nil)

// Commit checks what was written against opts, seals the file (checksum
// and type attributes, fsync), links it to key without overwriting and
// fsyncs the directory.
func (sp *spool) Commit(ctx context.Context, key string, opts storage.PutOptions) (storage.ObjectInfo, error) {
	if sp.Committed() {
		return storage.ObjectInfo{}, storage.ErrSpoolCommitted
	}
	if err := ctx.Err(); err != nil {
		return storage.ObjectInfo{}, err
	}
	if err := storage.ValidateKey(key); err != nil {
		return storage.ObjectInfo{}, err
	}
	sum := sp.SHA256()
	if err := matches(sp.Size(), sum, opts); err != nil {
		return storage.ObjectInfo{}, err
	}
	d, err := sp.store.keyDir(key)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	defer func() { _ = d.Close() }()
	if err := seal(sp.File, sum, opts.ContentType); err != nil {
		return storage.ObjectInfo{}, err
	}
	if err := link(sp.File, d, path.Base(key)); err != nil {
		return storage.ObjectInfo{}, err
	}
	sp.MarkCommitted()
	if err := d.Sync(); err != nil {
		return storage.ObjectInfo{}, mapError(err)
	}
	// The spool's descriptor is the object's inode, and its attributes are
	// the ones just written: fstat alone completes what is known.
	oi, err := infoUntyped(key, sp.File, etagOf(sum))
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	oi.SHA256, oi.ContentType = sum, opts.ContentType
	return oi, nil
}
