package servecontent

import (
	"strconv"
	"strings"
	"testing"

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
		"bytes=" + strings.Join(many[:MaxRanges], ","):  true,
		"bytes=" + strings.Join(many, ","):              false, // one too many
		"bytes=1000-2000":                               true,  // selects nothing: ServeContent's 416
		"items=0-1,0-1":                                 true,  // not bytes: ignored by ServeContent
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

func FuzzCheckRanges(f *testing.F) {
	f.Add("bytes=0-1,3-4", int64(10))
	f.Add("bytes=-1,0-", int64(3))
	f.Fuzz(func(t *testing.T, header string, size int64) {
		if CheckRanges(header, size) != nil {
			return
		}
		// What CheckRanges lets through never asks for more than the object in
		// all, nor for more than MaxRanges parts.
		specs, ok := strings.CutPrefix(header, "bytes=")
		if !ok {
			return
		}
		var total int64
		n := 0
		for spec := range strings.SplitSeq(specs, ",") {
			if a, b, ok := parse(strings.TrimSpace(spec), size); ok {
				total += b - a + 1
				n++
			}
		}
		require.LessOrEqual(t, n, MaxRanges)
		require.LessOrEqual(t, total, max(size, 0))
	})
}
