package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	openapi_types "github.com/oapi-codegen/runtime/types"

	"github.com/uploadedfile/uploadedfile/gen/api"
)

// fileJSON is a response whose body is one api.UploadedFile: the detail
// (GET /uploaded-file/{id}), a buffer upload's 201 and a complete's 200.
// It writes the bytes the generated responses write (encoding/json's, with
// its trailing newline; filejson_test.go holds the two equal over every
// field of the type) without reflection and without allocating: on the
// lookup path the generated encoder was the largest cost of our own after
// the query (docs/performance.md).
type fileJSON struct {
	status   int
	file     api.UploadedFile
	location *string // the Location of a 201
}

// VisitGetFileResponse implements api.GetFileResponseObject.
func (r fileJSON) VisitGetFileResponse(w http.ResponseWriter) error { return r.visit(w) }

// VisitUploadFileResponse implements api.UploadFileResponseObject.
func (r fileJSON) VisitUploadFileResponse(w http.ResponseWriter) error { return r.visit(w) }

// VisitCompleteUploadResponse implements api.CompleteUploadResponseObject.
func (r fileJSON) VisitCompleteUploadResponse(w http.ResponseWriter) error { return r.visit(w) }

// fileListJSON is a page of files (GET /uploaded-file), written as
// fileJSON writes one file.
type fileListJSON struct {
	list api.FileList
}

// VisitListFilesResponse implements api.ListFilesResponseObject.
func (r fileListJSON) VisitListFilesResponse(w http.ResponseWriter) error {
	if refusedTime(r.list.Items...) {
		if _, err := json.Marshal(r.list); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, func(b []byte) []byte {
		b = append(b, `{"items":`...)
		if r.list.Items == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for i := range r.list.Items {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendUploadedFile(b, &r.list.Items[i])
			}
			b = append(b, ']')
		}
		if r.list.NextCursor != nil {
			b = appendString(append(b, `,"nextCursor":`...), *r.list.NextCursor)
		}
		return append(b, '}')
	})
}

// jsonBuffers holds response buffers between requests.
var jsonBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func (r fileJSON) visit(w http.ResponseWriter) error {
	if refusedTime(r.file) {
		if _, err := json.Marshal(r.file); err != nil {
			return err
		}
	}
	if r.location != nil {
		w.Header().Set("Location", *r.location)
	}
	return writeJSON(w, r.status, func(b []byte) []byte { return appendUploadedFile(b, &r.file) })
}

// refusedTime reports whether one of files holds a time time.Time's
// MarshalJSON refuses (a year outside 0-9999): its response fails with
// encoding/json's error, as the generated one does (the service never
// holds such a time).
func refusedTime(files ...api.UploadedFile) bool {
	ok := func(t *time.Time) bool { return t == nil || (t.Year() >= 0 && t.Year() <= 9999) }
	for i := range files {
		f := &files[i]
		if !ok(&f.CreatedAt) || !ok(f.CompletedAt) || !ok(f.ExpiredAt) || !ok(f.UrlExpiredAt) {
			return true
		}
	}
	return false
}

// writeJSON answers status with the JSON body appendBody appends and a
// newline, as the generated responses do.
func writeJSON(w http.ResponseWriter, status int, appendBody func([]byte) []byte) error {
	bp := jsonBuffers.Get().(*[]byte)
	b := append(appendBody((*bp)[:0]), '\n')
	w.Header()["Content-Type"] = []string{"application/json"}
	w.WriteHeader(status)
	_, err := w.Write(b)
	if cap(b) <= 64<<10 {
		*bp = b
		jsonBuffers.Put(bp)
	}
	return err
}

// appendUploadedFile appends f as encoding/json marshals it: the fields in
// the struct's order, the optional ones omitted when nil. Every field is
// appended with a leading comma; the first one's becomes the brace
// (contentType is never omitted, so there is always one).
func appendUploadedFile(b []byte, f *api.UploadedFile) []byte {
	open := len(b)
	b = appendOptionalString(b, `,"checksum":`, f.Checksum)
	b = appendOptionalTime(b, `,"completedAt":`, f.CompletedAt)
	b = appendString(append(b, `,"contentType":`...), f.ContentType)
	b = appendTime(append(b, `,"createdAt":`...), f.CreatedAt)
	b = appendString(append(b, `,"disposition":`...), string(f.Disposition))
	b = appendOptionalString(b, `,"entity":`, f.Entity)
	b = appendOptionalString(b, `,"entityId":`, f.EntityId)
	b = appendOptionalTime(b, `,"expiredAt":`, f.ExpiredAt)
	b = appendOptionalInt(b, `,"height":`, f.Height)
	b = append(b, `,"id":"`...)
	b = append(b, f.Id.String()...)
	b = strconv.AppendBool(append(b, `","isTemporary":`...), f.IsTemporary)
	b = appendOptionalString(b, `,"module":`, f.Module)
	b = appendString(append(b, `,"originalName":`...), f.OriginalName)
	b = strconv.AppendInt(append(b, `,"sizeBytes":`...), f.SizeBytes, 10)
	b = appendString(append(b, `,"status":`...), string(f.Status))
	b = appendOptionalString(b, `,"type":`, f.Type)
	b = appendOptionalString(b, `,"url":`, f.Url)
	b = appendOptionalTime(b, `,"urlExpiredAt":`, f.UrlExpiredAt)
	b = appendString(append(b, `,"visibility":`...), string(f.Visibility))
	b = appendOptionalInt(b, `,"width":`, f.Width)
	b[open] = '{'
	return append(b, '}')
}

// appendOptionalInt appends key and *n, nothing when n is nil.
func appendOptionalInt(b []byte, key string, n *int) []byte {
	if n == nil {
		return b
	}
	return strconv.AppendInt(append(b, key...), int64(*n), 10)
}

// appendOptionalString appends key and *s, nothing when s is nil
// (omitempty on a pointer).
func appendOptionalString(b []byte, key string, s *string) []byte {
	if s == nil {
		return b
	}
	return appendString(append(b, key...), *s)
}

// appendOptionalTime appends key and *t, nothing when t is nil.
func appendOptionalTime(b []byte, key string, t *time.Time) []byte {
	if t == nil {
		return b
	}
	return appendTime(append(b, key...), *t)
}

// appendTime appends t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds), for a time refusedTime accepts.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string exactly as encoding/json writes
// it (HTML-escaped: <, > and & as \u003c, \u003e, \u0026), in one pass
// over s. Strings with bytes outside ASCII go through encoding/json
// itself, which also repairs invalid UTF-8 and escapes U+2028 and U+2029.
func appendString(b []byte, s string) []byte {
	mark := len(b)
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return appendMarshaled(b[:mark], s)
		}
		if jsonVerbatim[c] {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// jsonVerbatim marks the ASCII bytes a JSON string carries as they are:
// not a control character, a quote, a backslash or one of <, > and &.
var jsonVerbatim = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendMarshaled appends s as encoding/json marshals it (a string
// always marshals).
func appendMarshaled(b []byte, s string) []byte {
	out, _ := json.Marshal(s)
	return append(b, out...)
}

// fileLocation is the Location of a file an end-user route created: its
// detail route.
func fileLocation(id openapi_types.UUID) *string {
	l := "/uploaded-file/" + id.String()
	return &l
}

// hostFileLocation is the Location of a file a host route created: the
// host's detail route.
func hostFileLocation(id openapi_types.UUID) *string {
	l := "/internal/uploaded-file/" + id.String()
	return &l
}

// locationOfAnswer is the Location of a recorded 201 answer of route (a
// replay): from the id at the top of its JSON body; nil when it has none.
func locationOfAnswer(route string, body []byte) *string {
	var created struct {
		ID openapi_types.UUID `json:"id"`
	}
	if json.Unmarshal(body, &created) != nil || created.ID == (openapi_types.UUID{}) {
		return nil
	}
	if strings.HasPrefix(route, "POST /internal/") {
		return hostFileLocation(created.ID)
	}
	return fileLocation(created.ID)
}
