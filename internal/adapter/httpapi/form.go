package httpapi

import (
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"slices"

	"github.com/uploadedfile/uploadedfile/internal/filecheck"
	"github.com/uploadedfile/uploadedfile/service"
)

// maxFieldBytes bounds a non-file form field.
const maxFieldBytes = 16 << 10

// form is a multipart upload read as a stream: the allowed fields, which
// must come before the file, then exactly one part named "file". The file
// part is handed to the service as a reader; when it ends, the reader looks
// for a second file and fails the read if there is one, so a request with
// two files is refused before anything is stored.
type form struct {
	mr       *multipart.Reader
	fields   map[string]string
	file     *singleFile
	fileName string
	fileType string
}

// readForm reads fields up to the file part.
func readForm(mr *multipart.Reader, allowed []string) (*form, error) {
	f := &form{mr: mr, fields: map[string]string{}}
	for {
		part, err := mr.NextPart()
		switch {
		case errors.Is(err, io.EOF):
			return nil, service.Refused(ruleMultipartNoFile, false)
		case err != nil:
			return nil, bodyError(err)
		}
		if part.FormName() == "file" {
			f.file, f.fileName, f.fileType = &singleFile{part: part, mr: mr}, part.FileName(), part.Header.Get("Content-Type")
			if f.fileType == "application/octet-stream" {
				f.fileType = "" // a browser's "unknown": let the extension decide
			}
			return f, nil
		}
		if part.FileName() != "" || !slices.Contains(allowed, part.FormName()) {
			return nil, service.ErrInvalidMeta
		}
		v, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
		if err != nil {
			return nil, bodyError(err)
		}
		if len(v) > maxFieldBytes {
			return nil, service.ErrInvalidMeta
		}
		f.fields[part.FormName()] = string(v)
	}
}

// check turns an upload error into the right refusal when the form itself
// was at fault: a second file, or a body over the multipart ceiling.
func (f *form) check(err error) error {
	switch {
	case f.file.tooMany:
		return service.Refused(ruleMultipartTooMany, false)
	case f.file.readErr != nil:
		return bodyError(f.file.readErr)
	}
	return err
}

// singleFile reads the file part and, at its end, makes sure no other file
// follows.
type singleFile struct {
	part    *multipart.Part
	mr      *multipart.Reader
	tooMany bool
	readErr error
}

func (s *singleFile) Read(p []byte) (int, error) {
	n, err := s.part.Read(p)
	if errors.Is(err, io.EOF) {
		for {
			next, nerr := s.mr.NextPart()
			if errors.Is(nerr, io.EOF) {
				return n, io.EOF
			}
			if nerr != nil {
				s.readErr = nerr
				return n, nerr
			}
			if next.FormName() == "file" || next.FileName() != "" {
				s.tooMany = true
				return n, errors.New("more than one file")
			}
			// A trailing field is ignored, but read so the body is drained.
			if _, derr := io.Copy(io.Discard, io.LimitReader(next, maxFieldBytes)); derr != nil {
				s.readErr = derr
				return n, derr
			}
		}
	}
	if err != nil {
		s.readErr = err
	}
	return n, err
}

// bodyError maps a failure to read the request body: over the ceiling is a
// size-only invalid upload (413); anything else a malformed form.
func bodyError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return service.Refused(filecheck.RuleSizeTooLarge, true)
	}
	return service.ErrInvalidMeta
}
