package servecontent

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCheckRanges(t *testing.T) {
	many := make([]string, MaxRanges+1)
	for i := range many {
		many[i] = strconv.Itoa(i*2) + "-" + strconv.Itoa(i*2)
	}
	for header, ok := range map[string]bool{
		"":                 true,
		"bytes=0-4":        true,
		"bytes=-5":         true,
		"bytes=10-":        true,
		"bytes=0-1,5-6,-2": true,
		"bytes=0-4,2-6":    false, // overlapping
		"bytes=5-6,0-1":    false, // unsorted
		"bytes=0-,0-":      false, // the whole file twice
		"bytes=-3,0-1":     false, // a suffix before an earlier range
		"bytes=" + strings.Join(many[:MaxRanges], ","): true,
		"bytes=" + strings.Join(many, ","):             false, // one too many
		"bytes=1000-2000":                              false, // selects nothing
		"bytes=-0":                                     false, // a zero-length suffix
		"bytes=" + strings.Repeat("-0,", 339) + "-0":   false, // many of them
		"bytes=0-1,":                                   false, // an empty spec
		"bytes=5-2":                                    false, // last before first
		"bytes=a-b":                                    false, // does not parse
		"bytes=0-1,200-300":                            true,  // one selects nothing, counted
		"items=0-1,0-1":                                true,  // not bytes: ignored by ServeContent
		"bytes=" + strings.Repeat("0", maxHeaderLength): false,
	} {
		err := CheckRanges(header, 100)
		if ok {
			require.NoError(t, err, header)
		} else {
			require.ErrorIs(t, err, ErrUnsatisfiable, header)
		}
	}
}

// partHeaderBytes bounds what a multipart/byteranges answer adds per part
// (boundary, Content-Type, Content-Range) and in all (the closing
// boundary).
const partHeaderBytes = 256

// FuzzCheckRanges: for any Range header and object size, what
// http.ServeContent sends for a request CheckRanges lets through is at
// most the object's size plus the part headers of at most MaxRanges
// parts: no header can make an answer larger than the file it serves.
func FuzzCheckRanges(f *testing.F) {
	f.Add("bytes=0-1,3-4", int64(10))
	f.Add("bytes=-1,0-", int64(3))
	f.Add("bytes=-0", int64(1<<20))
	f.Add("bytes=-0,-0,-0", int64(2))
	f.Add("bytes=0-0,1-1,2-2,3-3", int64(4))
	f.Fuzz(func(t *testing.T, header string, size int64) {
		size = max(0, size%4096)
		if CheckRanges(header, size) != nil {
			return
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/f", nil)
		req.Header.Set("Range", header)
		http.ServeContent(rec, req, "f.bin", time.Time{}, bytes.NewReader(make([]byte, size)))
		require.LessOrEqual(t, int64(rec.Body.Len()), size+int64(MaxRanges+1)*partHeaderBytes,
			"Range %q on %d bytes: %d bytes sent (%d)", header, size, rec.Body.Len(), rec.Code)
		if rec.Code == http.StatusPartialContent && rec.Header().Get("Content-Range") != "" {
			require.NotContains(t, rec.Header().Get("Content-Range"), "bytes "+strconv.FormatInt(size, 10)+"-", "a part that starts past the end")
		}
	})
}
