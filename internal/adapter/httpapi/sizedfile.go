package httpapi

import (
	"io"
	"os"
	"syscall"
)

// sizedFile is an open stored file whose size the store already read from
// the same descriptor (fstat), served through http.ServeContent.
// ServeContent learns the size with Seek(0, io.SeekEnd) and rewinds with
// Seek(0, io.SeekStart): two system calls on every download that answer
// what is known (measured in docs/performance.md). sizedFile answers those
// two from the size while the descriptor has not moved; any other use
// first puts the descriptor where the reader believes it is and then is
// the file's own. The embedded *os.File keeps SyscallConn, so the
// connection still sends the body with sendfile from the descriptor's
// offset.
type sizedFile struct {
	*os.File
	size int64
	// untouched: the descriptor's offset is still 0, where open left it,
	// and only the two answered seeks have happened; atEnd: the reader's
	// position is then size (after Seek(0, io.SeekEnd)), not 0.
	untouched, atEnd bool
}

func newSizedFile(f *os.File, size int64) *sizedFile {
	return &sizedFile{File: f, size: size, untouched: true}
}

// Seek answers a seek to the start or the end from the size while the
// descriptor is untouched; any other seek is the file's.
func (s *sizedFile) Seek(offset int64, whence int) (int64, error) {
	if s.untouched && offset == 0 {
		switch whence {
		case io.SeekEnd:
			s.atEnd = true
			return s.size, nil
		case io.SeekStart:
			s.atEnd = false
			return 0, nil
		}
	}
	if err := s.settle(); err != nil {
		return 0, err
	}
	return s.File.Seek(offset, whence)
}

// settle moves the descriptor to the reader's position before the file is
// read or sought through it (a seek the file refuses then leaves it there,
// as it leaves the file).
func (s *sizedFile) settle() error {
	if !s.untouched {
		return nil
	}
	s.untouched = false
	if s.atEnd {
		_, err := s.File.Seek(0, io.SeekEnd)
		return err
	}
	return nil
}

// Read implements io.Reader.
func (s *sizedFile) Read(p []byte) (int, error) {
	if err := s.settle(); err != nil {
		return 0, err
	}
	return s.File.Read(p)
}

// WriteTo implements io.WriterTo (the file's own copies from its offset).
func (s *sizedFile) WriteTo(w io.Writer) (int64, error) {
	if err := s.settle(); err != nil {
		return 0, err
	}
	return s.File.WriteTo(w)
}

// SyscallConn implements syscall.Conn: the connection's sendfile reads
// from the descriptor's offset.
func (s *sizedFile) SyscallConn() (syscall.RawConn, error) {
	if err := s.settle(); err != nil {
		return nil, err
	}
	return s.File.SyscallConn()
}
