package imageheader_test

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"testing"

	"github.com/HugoSmits86/nativewebp"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/imageheader"
)

func picture(w, h int) image.Image {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range m.Pix {
		m.Pix[i] = byte(i)
	}
	return m
}

func encoded(t testing.TB, format string, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&b, picture(w, h))
	case "jpeg":
		err = jpeg.Encode(&b, picture(w, h), nil)
	case "gif":
		err = gif.Encode(&b, picture(w, h), nil)
	case "webp":
		err = nativewebp.Encode(&b, picture(w, h), nil)
	}
	require.NoError(t, err)
	return b.Bytes()
}

// withSegment inserts a JPEG segment (marker, payload) after the SOI.
func withSegment(j []byte, marker byte, payload []byte) []byte {
	seg := []byte{0xFF, marker, 0, 0}
	binary.BigEndian.PutUint16(seg[2:], uint16(len(payload)+2))
	out := append([]byte{}, j[:2]...)
	out = append(out, seg...)
	out = append(out, payload...)
	return append(out, j[2:]...)
}

// exifOrientation is an APP1 EXIF payload (little-endian TIFF) with one
// IFD0 entry: the orientation.
func exifOrientation(o uint16) []byte {
	var t bytes.Buffer
	t.WriteString("Exif\x00\x00II")
	_ = binary.Write(&t, binary.LittleEndian, []uint16{42})
	_ = binary.Write(&t, binary.LittleEndian, uint32(8))
	_ = binary.Write(&t, binary.LittleEndian, uint16(1))
	_ = binary.Write(&t, binary.LittleEndian, []uint16{0x0112, 3})
	_ = binary.Write(&t, binary.LittleEndian, uint32(1))
	_ = binary.Write(&t, binary.LittleEndian, []uint16{o, 0})
	_ = binary.Write(&t, binary.LittleEndian, uint32(0))
	return t.Bytes()
}

// TestEveryFormat: each format's size is read from its header, without
// the pixels (the first bytes alone are enough).
func TestEveryFormat(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"png", "jpeg", "gif", "webp"} {
		src := encoded(t, format, 37, 23)
		h, err := imageheader.Read(src[:min(len(src), 64)])
		if format == "jpeg" || format == "gif" {
			// Their frame header comes after the tables: the whole header.
			h, err = imageheader.Read(src)
		}
		require.NoError(t, err, format)
		require.Equal(t, format, h.Format)
		w, hh := h.Upright()
		require.Equal(t, [2]int{37, 23}, [2]int{w, hh}, format)
	}
}

// TestOrientationTurnsTheSize: EXIF orientations 5 to 8 turn the image a
// quarter: its upright size is swapped; 1 to 4 keep it.
func TestOrientationTurnsTheSize(t *testing.T) {
	t.Parallel()
	j := encoded(t, "jpeg", 40, 10)
	for o := uint16(1); o <= 8; o++ {
		h, err := imageheader.Read(withSegment(j, 0xE1, exifOrientation(o)))
		require.NoError(t, err)
		require.EqualValues(t, o, h.Orientation)
		w, hh := h.Upright()
		if o >= 5 {
			require.Equal(t, [2]int{10, 40}, [2]int{w, hh}, "orientation %d", o)
		} else {
			require.Equal(t, [2]int{40, 10}, [2]int{w, hh}, "orientation %d", o)
		}
	}
}

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r *bytes.Reader
	n int
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += n
	return n, err
}

// TestHostileHeaders: what cannot be read is an error, never a guess, and
// ReadAt reads at most MaxHeader bytes whatever the file's size.
func TestHostileHeaders(t *testing.T) {
	t.Parallel()
	p := encoded(t, "png", 5, 5)
	zeroWidth := append([]byte{}, p...)
	binary.BigEndian.PutUint32(zeroWidth[16:], 0) // IHDR width
	cases := map[string][]byte{
		"empty":           nil,
		"text":            []byte("id,amount\n1,2\n"),
		"png signature":   p[:8],
		"png cut in IHDR": p[:20],
		"png zero width":  zeroWidth,
		"jpeg SOI only":   {0xFF, 0xD8},
		"gif cut":         encoded(t, "gif", 3, 3)[:8],
		"riff not webp":   []byte("RIFF\x10\x00\x00\x00WAVEfmt "),
	}
	for name, src := range cases {
		_, err := imageheader.Read(src)
		require.ErrorIs(t, err, imageheader.ErrNoHeader, name)
	}

	// A JPEG whose frame header comes after more than MaxHeader bytes of
	// metadata: ReadAt reads MaxHeader bytes and gives up.
	j := encoded(t, "jpeg", 8, 8)
	for range imageheader.MaxHeader/60000 + 1 {
		j = withSegment(j, 0xE2, bytes.Repeat([]byte{'m'}, 60000))
	}
	big := append(j, bytes.Repeat([]byte{0}, 4<<20)...)
	c := &countingReaderAt{r: bytes.NewReader(big)}
	_, err := imageheader.ReadAt(c, int64(len(big)))
	require.ErrorIs(t, err, imageheader.ErrNoHeader)
	require.LessOrEqual(t, c.n, imageheader.MaxHeader, "a bounded read")

	// A PNG of 4 MiB: one read of at most MaxHeader bytes.
	c = &countingReaderAt{r: bytes.NewReader(append(encoded(t, "png", 9, 4), make([]byte, 4<<20)...))}
	h, err := imageheader.ReadAt(c, int64(c.r.Len()))
	require.NoError(t, err)
	require.Equal(t, [2]int{9, 4}, [2]int{h.Width, h.Height})
	require.LessOrEqual(t, c.n, imageheader.MaxHeader)

	// An animated WebP is recognised (VP8X, the animation flag), its
	// canvas size read: 10 x 5.
	vp8x := []byte("RIFF\x16\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x02\x00\x00\x00\x09\x00\x00\x04\x00\x00")
	h, err = imageheader.Read(vp8x)
	require.NoError(t, err)
	require.True(t, h.Animated)
	require.Equal(t, [2]int{10, 5}, [2]int{h.Width, h.Height})
}

// FuzzRead: any bytes give a header or ErrNoHeader, never a panic, and a
// header's size is positive.
func FuzzRead(f *testing.F) {
	for _, format := range []string{"png", "jpeg", "gif", "webp"} {
		f.Add(encoded(f, format, 3, 2))
	}
	f.Add(withSegment(encoded(f, "jpeg", 4, 4), 0xE1, exifOrientation(6)))
	f.Fuzz(func(t *testing.T, src []byte) {
		h, err := imageheader.Read(src)
		if err == nil {
			require.Positive(t, h.Width)
			require.Positive(t, h.Height)
			require.True(t, h.Orientation >= 1 && h.Orientation <= 8)
		}
	})
}
