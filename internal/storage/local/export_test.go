package local

import (
	"os"

	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// SpoolFile returns the unnamed file of a local spool, or nil when sp is
// some other spool.
func SpoolFile(sp storage.Spool) *os.File {
	if l, ok := sp.(*spool); ok {
		return l.file
	}
	return nil
}
