package imagevariant

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"sync/atomic"
	"testing"
	"time"

	"github.com/HugoSmits86/nativewebp"
	"github.com/stretchr/testify/require"
	"golang.org/x/image/webp"

	"github.com/uploadedfile/uploadedfile/internal/imageheader"
)

var (
	red  = color.RGBA{255, 0, 0, 255}
	blue = color.RGBA{0, 0, 255, 255}
)

// halves is a w x h image, left half red, right half blue.
func halves(w, h int) *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			c := red
			if x >= w/2 {
				c = blue
			}
			m.Set(x, y, c)
		}
	}
	return m
}

func encode(t testing.TB, format string, m image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&b, m)
	case "jpeg":
		err = jpeg.Encode(&b, m, &jpeg.Options{Quality: 95})
	case "gif":
		err = gif.Encode(&b, m, nil)
	case "webp":
		err = nativewebp.Encode(&b, m, nil)
	}
	require.NoError(t, err)
	return b.Bytes()
}

// decodeOut decodes a variant with the standard decoders.
func decodeOut(t *testing.T, r Result) image.Image {
	t.Helper()
	var m image.Image
	var err error
	switch r.ContentType {
	case "image/webp":
		m, err = webp.Decode(bytes.NewReader(r.Data))
	default:
		m, _, err = image.Decode(bytes.NewReader(r.Data))
	}
	require.NoError(t, err)
	require.Equal(t, image.Rect(0, 0, r.Width, r.Height), m.Bounds())
	return m
}

// near reports whether c is close to want (lossy encoders, resampling).
func near(c color.Color, want color.RGBA) bool {
	r, g, b, a := c.RGBA()
	d := func(x uint32, y uint8) bool { return int(x>>8)-int(y) < 40 && int(y)-int(x>>8) < 40 }
	return d(r, want.R) && d(g, want.G) && d(b, want.B) && d(a, want.A)
}

func TestEveryInputFormatAndFit(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		g := New(Limits{Engine: e})
		src := halves(200, 100)
		for _, in := range []string{"png", "jpeg", "gif", "webp"} {
			for _, tc := range []struct {
				fit  Fit
				w, h int
			}{{FitCover, 50, 50}, {FitContain, 50, 50}, {FitInside, 50, 25}} {
				for _, out := range []Format{FormatJPEG, FormatPNG, FormatWebP} {
					t.Run(in+"/"+string(tc.fit)+"/"+string(out), func(t *testing.T) {
						r, err := g.Generate(context.Background(), encode(t, in, src), Spec{Width: 50, Height: 50, Fit: tc.fit, Format: out})
						require.NoError(t, err)
						require.Equal(t, out.ContentType(), r.ContentType)
						require.Equal(t, [2]int{tc.w, tc.h}, [2]int{r.Width, r.Height})
						m := decodeOut(t, r)
						// The left of the image stays red and its right blue.
						midY := r.Height / 2
						switch tc.fit {
						case FitCover: // the centre 100x100 of 200x100: half each
							require.True(t, near(m.At(5, midY), red), "%v", m.At(5, midY))
							require.True(t, near(m.At(44, midY), blue), "%v", m.At(44, midY))
						case FitContain: // 50x25 in the middle, padded above and below
							require.True(t, near(m.At(5, midY), red), "%v", m.At(5, midY))
							require.True(t, near(m.At(44, midY), blue))
							pad := color.RGBA{} // transparent
							if out == FormatJPEG {
								pad = color.RGBA{255, 255, 255, 255}
							}
							require.True(t, near(m.At(25, 2), pad), "padding: %v", m.At(25, 2))
						case FitInside:
							require.True(t, near(m.At(5, midY), red))
							require.True(t, near(m.At(44, midY), blue))
						}
					})
				}
			}
		}
	})
}

func TestLargeDownscaleUsesEveryPixel(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		// 2000x1000 into 100x100 cover: the box prefilter path.
		r, err := New(Limits{Engine: e}).Generate(context.Background(), encode(t, "jpeg", halves(2000, 1000)), Spec{Width: 100, Height: 100, Fit: FitCover, Format: FormatPNG})
		require.NoError(t, err)
		m := decodeOut(t, r)
		require.True(t, near(m.At(10, 50), red))
		require.True(t, near(m.At(90, 50), blue))
	})
}

// pngWithHeader is a PNG whose IHDR declares w x h and whose IDAT holds
// rows rows of zeros (deflated): 0 rows is a 1-pixel-sized file declaring
// a huge image; all rows is a real decompression bomb.
func pngWithHeader(t testing.TB, w, h, rows int) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		crc := crc32.NewIEEE()
		crc.Write([]byte(typ))
		crc.Write(data)
		_ = binary.Write(&b, binary.BigEndian, crc.Sum32())
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = 8, 0 // 8-bit grayscale
	chunk("IHDR", ihdr)
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	row := make([]byte, 1+w)
	for range rows {
		_, _ = zw.Write(row)
	}
	require.NoError(t, zw.Close())
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return b.Bytes()
}

func TestPixelBombsAreRefusedBeforeDecoding(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		g := New(Limits{Engine: e})
		spec := Spec{Width: 64, Height: 64, Fit: FitInside, Format: FormatPNG}

		// A tiny file declaring 100k x 100k.
		lying := pngWithHeader(t, 100_000, 100_000, 0)
		require.Less(t, len(lying), 100)
		_, err := g.Generate(context.Background(), lying, spec)
		require.ErrorIs(t, err, ErrTooManyPixels)

		// A real decompression bomb: 10k x 10k of zeros (100 MP) in a few
		// hundred KiB.
		bomb := pngWithHeader(t, 10_000, 10_000, 10_000)
		require.Less(t, len(bomb), 512<<10)
		_, err = g.Generate(context.Background(), bomb, spec)
		require.ErrorIs(t, err, ErrTooManyPixels)

		// The same bomb under a limit it fits decodes (the limit is what
		// refused it, not the format).
		small := pngWithHeader(t, 1000, 1000, 1000)
		r, err := New(Limits{Engine: e, MaxPixels: 1_000_000}).Generate(context.Background(), small, spec)
		require.NoError(t, err)
		require.Equal(t, 64, r.Width)
		_, err = New(Limits{Engine: e, MaxPixels: 999_999}).Generate(context.Background(), small, spec)
		require.ErrorIs(t, err, ErrTooManyPixels)

		// A JPEG whose frame header declares 65535 x 65535.
		j := encode(t, "jpeg", halves(8, 8))
		i := bytes.Index(j, []byte{0xFF, 0xC0})
		require.Positive(t, i)
		binary.BigEndian.PutUint16(j[i+5:], 65535)
		binary.BigEndian.PutUint16(j[i+7:], 65535)
		_, err = g.Generate(context.Background(), j, spec)
		require.ErrorIs(t, err, ErrTooManyPixels)
	})
}

func TestNotAnImage(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		g := New(Limits{Engine: e})
		spec := Spec{Width: 64, Height: 64, Fit: FitInside, Format: FormatPNG}
		for _, src := range [][]byte{nil, []byte("%PDF-1.7\n"), []byte("<svg xmlns='http://www.w3.org/2000/svg'/>"), encode(t, "png", halves(4, 4))[:40]} {
			_, err := g.Generate(context.Background(), src, spec)
			require.ErrorIs(t, err, ErrUnsupported)
		}
	})
}

func TestAnimatedGIFUsesTheFirstFrame(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		pal := color.Palette{red, blue}
		frame := func(c uint8) *image.Paletted {
			m := image.NewPaletted(image.Rect(0, 0, 20, 20), pal)
			for i := range m.Pix {
				m.Pix[i] = c
			}
			return m
		}
		var b bytes.Buffer
		require.NoError(t, gif.EncodeAll(&b, &gif.GIF{Image: []*image.Paletted{frame(0), frame(1), frame(1)}, Delay: []int{10, 10, 10}}))
		r, err := New(Limits{Engine: e}).Generate(context.Background(), b.Bytes(), Spec{Width: 10, Height: 10, Fit: FitCover, Format: FormatPNG})
		require.NoError(t, err)
		m := decodeOut(t, r)
		require.True(t, near(m.At(5, 5), red), "the first frame: %v", m.At(5, 5))
	})
}

// A GIF's first frame may cover part of its canvas only: the variant is
// of the canvas, the frame where it stands and the rest transparent.
func TestGIFFrameOffsetInItsCanvas(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		frame := image.NewPaletted(image.Rect(20, 0, 40, 20), color.Palette{color.Transparent, red})
		for i := range frame.Pix {
			frame.Pix[i] = 1
		}
		var b bytes.Buffer
		require.NoError(t, gif.EncodeAll(&b, &gif.GIF{Image: []*image.Paletted{frame}, Delay: []int{0},
			Config: image.Config{Width: 40, Height: 20, ColorModel: frame.Palette}}))
		r, err := New(Limits{Engine: e}).Generate(context.Background(), b.Bytes(), Spec{Width: 40, Height: 20, Fit: FitInside, Format: FormatPNG})
		require.NoError(t, err)
		m := decodeOut(t, r)
		require.Equal(t, [2]int{40, 20}, [2]int{r.Width, r.Height})
		require.True(t, near(m.At(30, 10), red), "the frame, on the right: %v", m.At(30, 10))
		_, _, _, a := m.At(10, 10).RGBA()
		require.Zero(t, a, "left of the frame: transparent")
	})
}

func TestAnimatedWebPIsRefused(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		// RIFF/WEBP with a VP8X chunk whose animation flag is set (a 10x10
		// canvas), then an ANIM chunk.
		var b bytes.Buffer
		b.WriteString("RIFF")
		_ = binary.Write(&b, binary.LittleEndian, uint32(4+18+14))
		b.WriteString("WEBPVP8X")
		_ = binary.Write(&b, binary.LittleEndian, uint32(10))
		b.Write([]byte{0x02, 0, 0, 0, 9, 0, 0, 9, 0, 0})
		b.WriteString("ANIM")
		_ = binary.Write(&b, binary.LittleEndian, uint32(6))
		b.Write(make([]byte, 6))
		_, err := New(Limits{Engine: e}).Generate(context.Background(), b.Bytes(), Spec{Width: 10, Height: 10, Fit: FitCover, Format: FormatPNG})
		require.ErrorIs(t, err, ErrAnimated)
	})
}

// withExif inserts an APP1 Exif segment (little-endian TIFF) with the
// orientation and a GPS IFD pointer plus a marker string, after the SOI.
func withExif(t testing.TB, j []byte, orientation uint16) []byte {
	t.Helper()
	var tiff bytes.Buffer
	le := binary.LittleEndian
	tiff.WriteString("II")
	_ = binary.Write(&tiff, le, uint16(42))
	_ = binary.Write(&tiff, le, uint32(8))
	_ = binary.Write(&tiff, le, uint16(2)) // two entries
	// 0x0112 orientation SHORT 1
	_ = binary.Write(&tiff, le, []uint16{0x0112, 3})
	_ = binary.Write(&tiff, le, uint32(1))
	_ = binary.Write(&tiff, le, []uint16{orientation, 0})
	// 0x8825 GPS IFD pointer LONG 1 -> offset 38
	_ = binary.Write(&tiff, le, []uint16{0x8825, 4})
	_ = binary.Write(&tiff, le, uint32(1))
	_ = binary.Write(&tiff, le, uint32(38))
	_ = binary.Write(&tiff, le, uint32(0)) // no next IFD
	// GPS IFD: one ASCII entry, GPSLatitudeRef, then a recognisable string.
	_ = binary.Write(&tiff, le, uint16(1))
	_ = binary.Write(&tiff, le, []uint16{0x0001, 2})
	_ = binary.Write(&tiff, le, uint32(2))
	tiff.WriteString("N\x00\x00\x00")
	_ = binary.Write(&tiff, le, uint32(0))
	tiff.WriteString("GPS-SECRET-48.8584N-2.2945E")
	seg := append([]byte("Exif\x00\x00"), tiff.Bytes()...)
	app1 := []byte{0xFF, 0xE1, 0, 0}
	binary.BigEndian.PutUint16(app1[2:], uint16(len(seg)+2))
	out := append([]byte{}, j[:2]...)
	out = append(out, app1...)
	out = append(out, seg...)
	return append(out, j[2:]...)
}

func TestExifIsStrippedAndOrientationApplied(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		g := New(Limits{Engine: e})
		src := withExif(t, encode(t, "jpeg", halves(40, 20)), 6)
		require.Equal(t, 6, imageheader.Orientation(src))
		require.Contains(t, string(src), "GPS-SECRET")
		for _, out := range []Format{FormatJPEG, FormatPNG, FormatWebP} {
			r, err := g.Generate(context.Background(), src, Spec{Width: 100, Height: 100, Fit: FitInside, Format: out})
			require.NoError(t, err)
			require.NotContains(t, string(r.Data), "GPS-SECRET")
			require.NotContains(t, string(r.Data), "Exif")
			// Orientation 6: the stored left (red) half is the upright top.
			require.Equal(t, [2]int{50, 100}, [2]int{r.Width, r.Height})
			m := decodeOut(t, r)
			require.True(t, near(m.At(25, 10), red), "%s top: %v", out, m.At(25, 10))
			require.True(t, near(m.At(25, 90), blue), "%s bottom: %v", out, m.At(25, 90))
		}
	})
}

func TestEveryOrientation(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		// A 2x1 image, red then blue, stored with each orientation: where the
		// red pixel ends up once upright.
		g := New(Limits{Engine: e})
		want := map[uint16]struct {
			w, h   int
			rx, ry int // the red pixel's upright position (scaled x10)
		}{
			1: {20, 10, 5, 5}, 2: {20, 10, 15, 5}, 3: {20, 10, 15, 5}, 4: {20, 10, 5, 5},
			5: {10, 20, 5, 5}, 6: {10, 20, 5, 5}, 7: {10, 20, 5, 15}, 8: {10, 20, 5, 15},
		}
		for o, w := range want {
			src := withExif(t, encode(t, "jpeg", halves(20, 10)), o)
			r, err := g.Generate(context.Background(), src, Spec{Width: w.w, Height: w.h, Fit: FitInside, Format: FormatPNG})
			require.NoError(t, err)
			require.Equal(t, [2]int{w.w, w.h}, [2]int{r.Width, r.Height}, "orientation %d", o)
			m := decodeOut(t, r)
			require.True(t, near(m.At(w.rx, w.ry), red), "orientation %d: %v", o, m.At(w.rx, w.ry))

			// A one-pixel strip through the middle (cover): a geometry that
			// takes the vips engine's step-by-step path, not its thumbnail.
			strip, at := Spec{Width: w.w, Height: 1, Fit: FitCover, Format: FormatPNG}, image.Pt(w.rx, 0)
			if w.h > w.w {
				strip, at = Spec{Width: 1, Height: w.h, Fit: FitCover, Format: FormatPNG}, image.Pt(0, w.ry)
			}
			r, err = g.Generate(context.Background(), src, strip)
			require.NoError(t, err)
			require.Equal(t, [2]int{strip.Width, strip.Height}, [2]int{r.Width, r.Height}, "orientation %d strip", o)
			m = decodeOut(t, r)
			require.True(t, near(m.At(at.X, at.Y), red), "orientation %d strip: %v", o, m.At(at.X, at.Y))
		}
	})
}

func TestMalformedExifIsIgnored(t *testing.T) {
	j := encode(t, "jpeg", halves(8, 8))
	good := withExif(t, j, 6)
	for cut := 4; cut < 60; cut++ {
		bad := append([]byte{}, good...)
		// Corrupt the TIFF at one offset at a time: never a panic, an
		// orientation in 1..8.
		bad[min(len(bad)-1, 10+cut)] ^= 0xFF
		o := imageheader.Orientation(bad)
		require.True(t, o >= 1 && o <= 8)
	}
	require.Equal(t, 1, imageheader.Orientation(j))
	require.Equal(t, 1, imageheader.Orientation(good[:12]))
}

func TestSpecValidation(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		for _, s := range []Spec{
			{Width: 0, Height: 10, Fit: FitCover, Format: FormatPNG},
			{Width: 10, Height: MaxSide + 1, Fit: FitCover, Format: FormatPNG},
			{Width: 10, Height: 10, Fit: "fill", Format: FormatPNG},
			{Width: 10, Height: 10, Fit: FitCover, Format: "heic"},
			{Width: 10, Height: 10, Fit: FitCover, Format: FormatJPEG, Quality: 101},
		} {
			require.Error(t, s.Validate(), "%+v", s)
			_, err := New(Limits{Engine: e}).Generate(context.Background(), encode(t, "png", halves(4, 4)), s)
			require.Error(t, err)
		}
		// AVIF is a valid spec; an engine that does not write it says so.
		avif := Spec{Width: 10, Height: 10, Fit: FitCover, Format: FormatAVIF}
		require.NoError(t, avif.Validate())
		r, err := New(Limits{Engine: e}).Generate(context.Background(), encode(t, "png", halves(40, 40)), avif)
		if !Writes(e, FormatAVIF) {
			require.ErrorIs(t, err, ErrFormat)
			return
		}
		require.NoError(t, err)
		require.Equal(t, "image/avif", r.ContentType)
		require.Equal(t, [2]int{10, 10}, [2]int{r.Width, r.Height})
		require.Equal(t, "ftyp", string(r.Data[4:8]), "an ISO-BMFF file")
		require.Contains(t, []string{"avif", "avis", "mif1"}, string(r.Data[8:12]))
	})
}

func TestAbandonedWorkKeepsItsSlot(t *testing.T) {
	eachEngine(t, func(t *testing.T, e Engine) {
		g := New(Limits{Engine: e, Concurrency: 1})
		src := encode(t, "png", halves(3000, 3000))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		// A cancelled context never takes a slot.
		_, err := g.Generate(ctx, src, Spec{Width: 10, Height: 10, Fit: FitCover, Format: FormatPNG})
		require.ErrorIs(t, err, context.Canceled)
		require.Empty(t, g.slots)

		// Work abandoned mid-way keeps the slot until it stops, so a second
		// generation waits for it instead of decoding beside it.
		ctx, cancel = context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := g.Generate(ctx, src, Spec{Width: 10, Height: 10, Fit: FitCover, Format: FormatPNG})
			errc <- err
		}()
		require.Eventually(t, func() bool { return len(g.slots) == 1 }, 5e9, 1e6)
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
		held := len(g.slots) == 1
		r, err := g.Generate(context.Background(), encode(t, "png", halves(4, 4)), Spec{Width: 2, Height: 2, Fit: FitCover, Format: FormatPNG})
		require.NoError(t, err)
		require.Equal(t, 2, r.Width)
		require.True(t, held, "the abandoned decode still held its slot when Generate returned")
	})
}

// The plane-wise shrink of a decoded JPEG equals the generic one (which
// converts every pixel first), within rounding, for every subsampling,
// odd factors and crops that start on odd pixels.
func TestYCbCrShrinkMatchesTheGenericOne(t *testing.T) {
	for _, ratio := range []image.YCbCrSubsampleRatio{image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio422, image.YCbCrSubsampleRatio420, image.YCbCrSubsampleRatio440} {
		m := image.NewYCbCr(image.Rect(0, 0, 97, 61), ratio)
		// Varied but within the range where YCbCr -> RGB does not clip
		// (clipping is where averaging before or after converting differ).
		for i := range m.Y {
			m.Y[i] = uint8(60 + (i*7)%120)
		}
		for i := range m.Cb {
			m.Cb[i], m.Cr[i] = uint8(100+(i*13)%56), uint8(100+(i*5)%56)
		}
		for _, k := range [][2]int{{2, 2}, {3, 3}, {4, 4}, {1, 5}, {6, 1}, {3, 2}} {
			kx, ky := k[0], k[1]
			w, h := min(20, 94/kx), min(11, 56/ky) // inside the 97 x 61 image
			r := image.Rect(3, 5, 3+kx*w, 5+ky*h)
			fast := boxShrinkYCbCr(m, r, kx, ky)
			require.NotNil(t, fast)
			rgba := image.NewRGBA(m.Bounds())
			for y := range 61 {
				for x := range 97 {
					rgba.Set(x, y, m.At(x, y))
				}
			}
			slow := boxShrink(rgba, r, kx, ky)
			require.Equal(t, slow.Bounds(), fast.Bounds())
			for i := range fast.Pix {
				d := int(fast.Pix[i]) - int(slow.Pix[i])
				require.True(t, d <= 3 && d >= -3, "ratio %v, k %v, sample %d: %d vs %d", ratio, k, i, fast.Pix[i], slow.Pix[i])
			}
		}
	}
}

// eachEngine runs test on every engine of this build (the conformance
// suite: go test -tags vips runs it on both).
func eachEngine(t *testing.T, test func(t *testing.T, e Engine)) {
	for _, e := range Engines() {
		t.Run(e.Name(), func(t *testing.T) { test(t, e) })
	}
}

// A JPEG longer than libjpeg's limit is refused on every engine alike,
// before it is decoded.
func TestJPEGOverLibjpegsLimitIsRefused(t *testing.T) {
	wide := encode(t, "jpeg", image.NewGray(image.Rect(0, 0, MaxJPEGSide+1, 2)))
	widest := encode(t, "jpeg", image.NewGray(image.Rect(0, 0, MaxJPEGSide, 2)))
	eachEngine(t, func(t *testing.T, e Engine) {
		g := New(Limits{Engine: e})
		spec := Spec{Width: 64, Height: 64, Fit: FitInside, Format: FormatPNG}
		_, err := g.Generate(context.Background(), wide, spec)
		require.ErrorIs(t, err, ErrUnsupported)
		r, err := g.Generate(context.Background(), widest, spec)
		require.NoError(t, err)
		require.Equal(t, [2]int{64, 1}, [2]int{r.Width, r.Height})
	})
}

// A PNG wider than any other format can be -- which libvips would hold
// whole lines of -- is fitted all the same, in every format the engine
// writes: its left half red, its right half blue.
func TestPNGWiderThan65535(t *testing.T) {
	src := encode(t, "png", halves(70_000, 3))
	eachEngine(t, func(t *testing.T, e Engine) {
		g := New(Limits{Engine: e})
		for _, f := range e.Formats() {
			for _, fit := range []Fit{FitInside, FitCover} {
				r, err := g.Generate(context.Background(), src, Spec{Width: 40, Height: 20, Fit: fit, Format: f})
				require.NoError(t, err, "%s %s", f, fit)
				if fit == FitCover {
					// The centre 40 x 20 of the scaled image straddles the halves.
					require.Equal(t, [2]int{40, 20}, [2]int{r.Width, r.Height})
					continue
				}
				require.Equal(t, [2]int{40, 1}, [2]int{r.Width, r.Height}, "%s", f)
				if f == FormatAVIF {
					continue // no AVIF decoder in Go
				}
				m := decodeOut(t, r)
				require.True(t, near(m.At(2, 0), red), "%s left: %v", f, m.At(2, 0))
				require.True(t, near(m.At(37, 0), blue), "%s right: %v", f, m.At(37, 0))
			}
		}
	})
}

// GenerateFrom reads its source inside its slot: with one slot, a second
// generation's read does not start while the first's source is held, and a
// failed read gives the slot back.
func TestGenerateFromReadsInsideTheSlot(t *testing.T) {
	g := New(Limits{Concurrency: 1})
	src := encode(t, "png", halves(8, 8))
	spec := Spec{Width: 4, Height: 4, Fit: FitCover, Format: FormatPNG}
	holding := make(chan struct{})
	release := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := g.GenerateFrom(context.Background(), func(context.Context) ([]byte, error) {
			close(holding)
			<-release
			return src, nil
		}, spec)
		first <- err
	}()
	<-holding
	var secondRead atomic.Bool
	second := make(chan error, 1)
	go func() {
		_, err := g.GenerateFrom(context.Background(), func(context.Context) ([]byte, error) {
			secondRead.Store(true)
			return src, nil
		}, spec)
		second <- err
	}()
	time.Sleep(50 * time.Millisecond)
	require.False(t, secondRead.Load(), "the second read started while the first source was held")
	close(release)
	require.NoError(t, <-first)
	require.NoError(t, <-second)
	require.True(t, secondRead.Load())

	boom := errors.New("the store did not answer")
	_, err := g.GenerateFrom(context.Background(), func(context.Context) ([]byte, error) { return nil, boom }, spec)
	require.ErrorIs(t, err, boom)
	r, err := g.Generate(context.Background(), src, spec)
	require.NoError(t, err, "the failed read gave its slot back")
	require.Equal(t, 4, r.Width)
}
