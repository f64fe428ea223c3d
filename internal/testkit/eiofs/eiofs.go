// Package eiofs mounts a directory through FUSE as a loopback file system
// that a test can switch to answer every write -- a file created or opened
// for writing, a directory made, a rename, a removal -- with EIO: the I/O
// error of a failing disk, produced where no device-mapper error target is
// available. Reads keep passing. Mounting needs root and /dev/fuse.
package eiofs

import (
	"context"
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is a mounted loopback file system.
type FS struct {
	// Dir is where it is mounted.
	Dir  string
	fail atomic.Bool
}

// Mount mounts backing at dir (both existing directories) until t ends.
func Mount(t testing.TB, backing, dir string) *FS {
	t.Helper()
	root, err := fs.NewLoopbackRoot(backing)
	if err != nil {
		t.Fatalf("eiofs: %v", err)
	}
	f := &FS{Dir: dir}
	server, err := fs.Mount(dir, &node{LoopbackNode: root.(*fs.LoopbackNode), fs: f}, &fs.Options{
		MountOptions: fuse.MountOptions{FsName: "eiofs", Name: "eiofs", DirectMountStrict: true},
	})
	if err != nil {
		t.Fatalf("eiofs: mount %s (needs root and /dev/fuse): %v", dir, err)
	}
	t.Cleanup(func() { _ = server.Unmount() })
	return f
}

// Fail switches the failure of every write on or off.
func (f *FS) Fail(on bool) { f.fail.Store(on) }

// node is a loopback node whose writes fail while its FS fails.
type node struct {
	*fs.LoopbackNode
	fs *FS
}

var _ fs.NodeWrapChilder = (*node)(nil)

// WrapChild makes every node of the tree one of ours.
func (n *node) WrapChild(_ context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*fs.LoopbackNode), fs: n.fs}
}

func (n *node) failing() bool { return n.fs.fail.Load() }

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if n.failing() {
		return nil, nil, 0, syscall.EIO
	}
	return n.LoopbackNode.Create(ctx, name, flags, mode, out)
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.failing() && flags&uint32(os.O_WRONLY|os.O_RDWR) != 0 {
		return nil, 0, syscall.EIO
	}
	return n.LoopbackNode.Open(ctx, flags)
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if n.failing() {
		return nil, syscall.EIO
	}
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if n.failing() {
		return syscall.EIO
	}
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	if n.failing() {
		return syscall.EIO
	}
	return n.LoopbackNode.Unlink(ctx, name)
}

// Tmpfile refuses unnamed files (O_TMPFILE): the loopback cannot give one
// extended attributes, which the local store writes. The store then uses
// named temporary files, as on any file system without O_TMPFILE.
func (n *node) Tmpfile(context.Context, uint32, uint32, *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}
