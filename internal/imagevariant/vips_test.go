//go:build vips

package imagevariant

import (
	"bytes"
	"testing"

	"github.com/davidbyttow/govips/v2/vips"
	"github.com/stretchr/testify/require"
	"golang.org/x/image/tiff"
)

// libvips reads the four formats this package accepts and no other: a
// TIFF (a loader libvips has, here and in every distribution) is refused
// by libvips itself, not only by the header check in front of it.
func TestVipsReadsOnlyTheFourFormats(t *testing.T) {
	vipsStart()
	var b bytes.Buffer
	require.NoError(t, tiff.Encode(&b, halves(4, 4), nil))
	img, err := vips.LoadImageFromBuffer(b.Bytes(), nil)
	if err == nil {
		img.Close()
	}
	require.Error(t, err, "libvips loaded a TIFF")
	for _, f := range []string{"png", "jpeg", "gif", "webp"} {
		img, err := vips.LoadImageFromBuffer(encode(t, f, halves(4, 4)), nil)
		require.NoError(t, err, f)
		img.Close()
	}
}

// The WebP libvips writes keeps its pixels and loses EXIF, XMP and ICC,
// and the flags that announced them.
func TestWebPWithoutMetadata(t *testing.T) {
	vipsStart()
	img, err := vips.LoadImageFromBuffer(withExif(t, encode(t, "jpeg", halves(40, 20)), 1), nil)
	require.NoError(t, err)
	defer img.Close()
	raw, _, err := img.ExportWebp(&vips.WebpExportParams{Quality: 80})
	require.NoError(t, err)
	require.Contains(t, string(raw), "EXIF", "libvips wrote no EXIF to strip: the test proves nothing")
	out, err := webpWithoutMetadata(raw)
	require.NoError(t, err)
	require.NotContains(t, string(out), "EXIF")
	require.NotContains(t, string(out), "Exif")
	m := decodeOut(t, Result{Data: out, Width: 40, Height: 20, ContentType: "image/webp"})
	require.True(t, near(m.At(5, 10), red))
	require.True(t, near(m.At(35, 10), blue))
	_, err = webpWithoutMetadata(raw[:len(raw)-3])
	require.Error(t, err)
	_, err = webpWithoutMetadata([]byte("RIFF\x00\x00\x00\x00WAVE"))
	require.Error(t, err)
}
