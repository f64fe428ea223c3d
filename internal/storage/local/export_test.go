package local

import (
	"os"

	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// SpoolFile returns the unnamed file of a local spool, or nil when sp is
// some other spool.
func SpoolFile(sp storage.Spool) *os.File {
	if l, ok := sp.(*spool); ok {
		return l.File
	}
	return nil
}

// UseOSRoot makes s open objects for reading as it does where openat2 is
// unavailable: through os.Root alone.
func UseOSRoot(s *Store) { s.noOpenat2.Store(true) }
