// Package servecontent is how every handler that serves stored bytes (the
// download routes and the local driver's signed URLs) answers: Range
// requests bounded, and headers that keep uploaded content from running in
// the serving origin.
//
// Ranges: http.ServeContent answers a multi-range request with one
// multipart part per range, and only falls back to the whole file when the
// ranges' sum exceeds it: tens of thousands of one-byte ranges made an
// answer about twelve times the file's size, all of it part headers.
// CheckRanges refuses such requests before ServeContent sees them, so an
// answer never exceeds the file's size plus at most MaxRanges part headers.
package servecontent

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// MaxRanges is the most ranges one request may ask for.
const MaxRanges = 16

// maxHeaderLength bounds the Range header itself (16 ranges of two 20-digit
// offsets each fit in well under it).
const maxHeaderLength = 1024

// ErrUnsatisfiable: the Range header asks for more ranges than MaxRanges,
// for overlapping or unsorted ranges, or is longer than a header of
// MaxRanges ranges can be. The answer is 416.
var ErrUnsatisfiable = errors.New("servecontent: too many, overlapping or unsorted ranges")

// CheckRanges reads the Range header of a request for an object of size bytes.
// A header that does not parse or asks for no byte of the object is left
// to http.ServeContent (which answers 416 or ignores it, as RFC 9110
// says); one it would answer with more than MaxRanges parts, or with parts
// that overlap or come out of order, is ErrUnsatisfiable.
func CheckRanges(header string, size int64) error {
	if header == "" {
		return nil
	}
	if len(header) > maxHeaderLength {
		return ErrUnsatisfiable
	}
	specs, ok := strings.CutPrefix(header, "bytes=")
	if !ok {
		return nil
	}
	n := 0
	end := int64(-1) // the last byte of the previous range
	for spec := range strings.SplitSeq(specs, ",") {
		start, last, ok := parse(strings.TrimSpace(spec), size)
		if !ok {
			continue // not satisfiable alone: ServeContent decides
		}
		n++
		if n > MaxRanges || start <= end {
			return ErrUnsatisfiable
		}
		end = last
	}
	return nil
}

// parse is one byte-range-spec of an object of size bytes as the first and
// last byte it selects; ok is false when it selects none or does not parse.
func parse(spec string, size int64) (first, last int64, ok bool) {
	a, b, found := strings.Cut(spec, "-")
	if !found || size <= 0 {
		return 0, 0, false
	}
	if a == "" { // a suffix: the last b bytes
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, false
		}
		return max(size-n, 0), size - 1, true
	}
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first < 0 || first >= size {
		return 0, 0, false
	}
	if b == "" {
		return first, size - 1, true
	}
	last, err = strconv.ParseInt(b, 10, 64)
	if err != nil || last < first {
		return 0, 0, false
	}
	return first, min(last, size-1), true
}

// RefuseRanges answers a request whose ranges CheckRanges refused: 416 with the
// object's size, as for any unsatisfiable range.
func RefuseRanges(w http.ResponseWriter, size int64) {
	w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
	http.Error(w, "too many, overlapping or unsorted ranges", http.StatusRequestedRangeNotSatisfiable)
}
