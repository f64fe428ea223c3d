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

// ErrUnsatisfiable means the Range header asks for more ranges than MaxRanges,
// for overlapping or unsorted ranges, holds a range spec that does not
// parse, or is longer than a header of MaxRanges ranges can be. The answer
// is 416.
var ErrUnsatisfiable = errors.New("servecontent: too many, overlapping or unsorted ranges")

// CheckRanges reads the Range header of a request for an object of size
// bytes. Every range spec counts: one that does not parse -- an empty one,
// a zero-length suffix ("-0"), a last byte before the first -- refuses the
// whole header, as do more than MaxRanges specs and ranges that overlap or
// come out of order (ErrUnsatisfiable). A range that parses but starts past
// the end selects nothing; it is counted all the same, and a header that
// selects no byte at all (an empty object's included, on which
// http.ServeContent would answer a 206 of "bytes 0--1/0") is refused too.
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
		n++
		if n > MaxRanges {
			return ErrUnsatisfiable
		}
		start, last, sel := parse(strings.TrimSpace(spec), size)
		switch {
		case sel == invalid:
			return ErrUnsatisfiable
		case sel == beyond:
			continue
		case start <= end:
			return ErrUnsatisfiable
		}
		end = last
	}
	if end < 0 { // no spec selected a byte
		return ErrUnsatisfiable
	}
	return nil
}

// selection is what one byte-range-spec selects of an object.
type selection int

const (
	// selected: some bytes, first to last.
	selected selection = iota
	// beyond: a well-formed spec that starts past the end (or an empty
	// object): nothing.
	beyond
	// invalid: the range does not parse, or is a zero-length suffix.
	invalid
)

// parse is one byte-range-spec of an object of size bytes as the first and
// last byte it selects, and whether it selects any.
func parse(spec string, size int64) (first, last int64, sel selection) {
	a, b, found := strings.Cut(spec, "-")
	if !found {
		return 0, 0, invalid
	}
	if a == "" { // a suffix: the last b bytes
		n, err := strconv.ParseInt(b, 10, 64)
		switch {
		case err != nil || n <= 0 || strings.TrimSpace(b) != b:
			return 0, 0, invalid
		case size <= 0:
			return 0, 0, beyond
		}
		return max(size-n, 0), size - 1, selected
	}
	first, err := strconv.ParseInt(a, 10, 64)
	if err != nil || first < 0 || strings.TrimSpace(a) != a {
		return 0, 0, invalid
	}
	last = size - 1
	if b != "" {
		if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first || strings.TrimSpace(b) != b {
			return 0, 0, invalid
		}
	}
	if first >= size {
		return 0, 0, beyond
	}
	return first, min(last, size-1), selected
}

// RefuseRanges answers a request whose ranges CheckRanges refused: 416 with the
// object's size, as for any unsatisfiable range.
func RefuseRanges(w http.ResponseWriter, size int64) {
	w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
	http.Error(w, "too many, overlapping or unsorted ranges", http.StatusRequestedRangeNotSatisfiable)
}
