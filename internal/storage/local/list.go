package local

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"

	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// List implements storage.Store: a walk of the root in byte order of the
// keys, as S3 lists them. A directory's entries are sorted by name, a
// directory's name counting as name + "/" (so "a/x" comes after "a-b/x",
// as the keys compare); subdirectories that cannot hold a key with the
// prefix are not entered. Only the names of the directory being walked are
// held (one tenant namespace's at most), never the whole tree. Files that
// are not objects -- a crash-left temporary write file, anything without
// the driver's checksum attribute -- are listed too, with what their inode
// says: they are what a reconcile has to find.
func (s *Store) List(ctx context.Context, prefix, after string, fn func(storage.ObjectInfo) error) error {
	return s.listDir(ctx, "", prefix, after, fn)
}

// mayFollow reports whether a directory whose keys all start with sub can
// hold a key after after: every key of it sorts after after when sub
// does, and before it when sub does and is no prefix of after.
func mayFollow(sub, after string) bool {
	return after == "" || sub > after || strings.HasPrefix(after, sub)
}

func (s *Store) listDir(ctx context.Context, dir, prefix, after string, fn func(storage.ObjectInfo) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := s.readDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		key := e.Name()
		if dir != "" {
			key = dir + "/" + e.Name()
		}
		if e.IsDir() {
			sub := key + "/"
			if (strings.HasPrefix(sub, prefix) || strings.HasPrefix(prefix, sub)) && mayFollow(sub, after) {
				if err := s.listDir(ctx, key, prefix, after, fn); err != nil {
					return err
				}
			}
			continue
		}
		if !e.Type().IsRegular() || !strings.HasPrefix(key, prefix) || (after != "" && key <= after) {
			continue
		}
		oi, err := s.listed(key)
		if errors.Is(err, storage.ErrNotFound) {
			continue // deleted since the directory was read
		}
		if err != nil {
			return err
		}
		if err := fn(oi); err != nil {
			return err
		}
	}
	return nil
}

// readDir reads dir's entries sorted as their keys compare.
func (s *Store) readDir(dir string) ([]fs.DirEntry, error) {
	name := dir
	if name == "" {
		name = "."
	}
	d, err := s.root.Open(name)
	if err != nil {
		return nil, mapError(err)
	}
	defer func() { _ = d.Close() }()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, mapError(err)
	}
	sortKey := func(e fs.DirEntry) string {
		if e.IsDir() {
			return e.Name() + "/"
		}
		return e.Name()
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(sortKey(a), sortKey(b)) })
	return entries, nil
}

// listed is what the listing reports of one file: its object info, or for
// a file this driver did not write (no checksum attribute), its size and
// modification time only.
func (s *Store) listed(key string) (storage.ObjectInfo, error) {
	f, err := s.openRead(key)
	if err != nil {
		return storage.ObjectInfo{}, err
	}
	defer func() { _ = f.Close() }()
	if oi, err := info(key, f); err == nil {
		return oi, nil
	}
	fi, err := f.Stat()
	if err != nil {
		return storage.ObjectInfo{}, mapError(err)
	}
	return storage.ObjectInfo{Key: key, Size: fi.Size(), LastModified: fi.ModTime()}, nil
}
