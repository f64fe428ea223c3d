// Package imageheader reads what an image declares in its first bytes --
// its format, its size, a JPEG's EXIF orientation, whether a WebP is
// animated -- without decoding a pixel. It reads hostile input: at most
// MaxHeader bytes, every offset bounds-checked; anything it cannot read is
// an error, never a guess.
//
// The file checks use it to record an uploaded image's width and height;
// the variant engines use it to refuse an image before decoding it.
package imageheader

import (
	"bytes"
	"errors"
	"image"
	_ "image/gif"  // registers GIF with image.DecodeConfig
	_ "image/jpeg" // registers JPEG
	_ "image/png"  // registers PNG
	"io"

	_ "golang.org/x/image/webp" // registers WebP
)

// MaxHeader bounds what Read and ReadAt read: an image whose size is not
// declared within its first MaxHeader bytes (a JPEG with that much
// metadata before its frame header) has no readable header.
const MaxHeader = 256 << 10

// ErrNoHeader means the input is not an image of a format read here, or its header is
// malformed, zero-sized or not within MaxHeader bytes.
var ErrNoHeader = errors.New("imageheader: no readable image header")

// Header is what an image declares.
type Header struct {
	// Format is "png", "jpeg", "gif" or "webp".
	Format string
	// Width and Height as stored (before the orientation).
	Width, Height int
	// Orientation is a JPEG's EXIF orientation, 1..8 (1: as stored).
	Orientation int
	// Animated: a WebP whose header sets the animation flag.
	Animated bool
}

// Upright is the size as shown: width and height swapped for the EXIF
// orientations that turn the image a quarter (5 to 8).
func (h Header) Upright() (width, height int) {
	if h.Orientation >= 5 {
		return h.Height, h.Width
	}
	return h.Width, h.Height
}

// Read reads the header from src, the image or its first bytes: only as
// far as the header goes.
func Read(src []byte) (Header, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(src))
	if err != nil || cfg.Width < 1 || cfg.Height < 1 {
		return Header{}, ErrNoHeader
	}
	h := Header{Format: format, Width: cfg.Width, Height: cfg.Height, Orientation: 1}
	switch format {
	case "jpeg":
		h.Orientation = Orientation(src)
	case "webp":
		h.Animated = webpAnimated(src)
	case "png", "gif":
	default:
		return Header{}, ErrNoHeader
	}
	return h, nil
}

// ReadAt reads the header of the image of size bytes in r: one read of at
// most MaxHeader bytes.
func ReadAt(r io.ReaderAt, size int64) (Header, error) {
	buf := make([]byte, min(size, MaxHeader))
	n, err := r.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return Header{}, err
	}
	return Read(buf[:n])
}
