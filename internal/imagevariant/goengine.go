package imagevariant

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
	"runtime/debug"

	"github.com/HugoSmits86/nativewebp"
	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp" // registers the WebP decoder with image.Decode

	"github.com/uploadedfile/uploadedfile/internal/imageheader"
)

// goEngine is the engine of every build: the standard library's and
// golang.org/x/image's codecs, a box shrink then Catmull-Rom, nativewebp
// for (lossless) WebP. It decodes in full.
type goEngine struct{}

// Name implements Engine.
func (goEngine) Name() string { return "go" }

// Version implements Engine: golang.org/x/image's module version.
func (goEngine) Version() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == "golang.org/x/image" {
				return "x/image " + d.Version
			}
		}
	}
	return ""
}

// Formats implements Engine: no AVIF.
func (goEngine) Formats() []Format { return []Format{FormatJPEG, FormatPNG, FormatWebP} }

// Make implements Engine.
func (goEngine) Make(src []byte, hdr imageheader.Header, spec Spec) (Result, error) {
	return generate(src, hdr, spec)
}

// generate decodes one frame, fits it and encodes it.
func generate(src []byte, hdr imageheader.Header, spec Spec) (Result, error) {
	img, denom, err := decode(src, hdr, spec)
	if err != nil {
		return Result{}, ErrUnsupported
	}
	out := fit(img, denom, hdr, spec)
	var buf bytes.Buffer
	switch spec.Format {
	case FormatJPEG:
		q := spec.Quality
		if q == 0 {
			q = 82
		}
		err = jpeg.Encode(&buf, flatten(out), &jpeg.Options{Quality: q})
	case FormatPNG:
		err = (&png.Encoder{CompressionLevel: png.DefaultCompression}).Encode(&buf, out)
	case FormatWebP:
		err = nativewebp.Encode(&buf, out, nil)
	}
	if err != nil {
		return Result{}, fmt.Errorf("imagevariant: encode: %w", err)
	}
	b := out.Bounds()
	return Result{Data: buf.Bytes(), Width: b.Dx(), Height: b.Dy(), ContentType: spec.Format.ContentType()}, nil
}

// decode decodes exactly one frame (gif.Decode stops after the first),
// with the denominator of its scale: 1, every decoder here decodes in
// full (a scaled decode, libjpeg's shrink-on-load, is the libvips
// engine's).
func decode(src []byte, hdr imageheader.Header, _ Spec) (image.Image, int, error) {
	if hdr.Format == "gif" {
		img, err := gif.Decode(bytes.NewReader(src))
		return img, 1, err
	}
	img, _, err := image.Decode(bytes.NewReader(src))
	return img, 1, err
}

// fit scales img, the image hdr describes decoded at 1/denom of its
// size, into spec's box and returns the upright result. Sizes and the
// crop are computed on the image as stored, so a scaled decode changes
// neither.
func fit(img image.Image, denom int, hdr imageheader.Header, spec Spec) *image.RGBA {
	l := plan(hdr, spec)
	// The rectangle is in the canvas's coordinates, where every decoder
	// puts its image (a GIF's first frame stands at its own place in it;
	// the rest of the canvas reads as transparent).
	srcRect := scaleRect(l.crop, denom, img.Bounds().Max)
	scaled := scaleTo(img, srcRect, l.dw, l.dh)
	upright := orient(scaled, hdr.Orientation)
	if spec.Fit != FitContain {
		return upright
	}
	canvas := image.NewRGBA(image.Rect(0, 0, spec.Width, spec.Height))
	off := image.Pt((spec.Width-l.sw)/2, (spec.Height-l.sh)/2)
	draw.Draw(canvas, upright.Bounds().Add(off), upright, image.Point{}, draw.Src)
	return canvas
}

// scaleRect maps r, in the stored image's pixels, onto the image decoded
// at 1/denom (size): pixel x of the stored image is in sample x/denom.
// Never empty, never outside the decoded image.
func scaleRect(r image.Rectangle, denom int, size image.Point) image.Rectangle {
	if denom == 1 {
		return r
	}
	at := func(v, limit int) int { return min(max(int(math.Round(float64(v)/float64(denom))), 0), limit) }
	out := image.Rect(at(r.Min.X, size.X), at(r.Min.Y, size.Y), at(r.Max.X, size.X), at(r.Max.Y, size.Y))
	if out.Dx() == 0 {
		out.Max.X = min(out.Min.X+1, size.X)
		out.Min.X = out.Max.X - 1
	}
	if out.Dy() == 0 {
		out.Max.Y = min(out.Min.Y+1, size.Y)
		out.Min.Y = out.Max.Y - 1
	}
	return out
}

// scaleTo scales the part r of img to w x h: a box filter first down to
// about twice the target on each axis, then Catmull-Rom (x/image/draw) for
// the rest. The two axes shrink apart: an image thousands of times wider
// than tall is boxed along its width even though its height stays, so
// Catmull-Rom never scales by more than about 2 on either axis -- its
// weight tables grow with the ratio (gigabytes for a 40-megapixel row).
func scaleTo(img image.Image, r image.Rectangle, w, h int) *image.RGBA {
	src := image.Image(img)
	sr := r
	if kx, ky := max(r.Dx()/(2*w), 1), max(r.Dy()/(2*h), 1); kx >= 2 || ky >= 2 {
		src = boxShrink(img, r, kx, ky)
		sr = src.Bounds()
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.CatmullRom.Scale(dst, dst.Bounds(), src, sr, draw.Src, nil)
	return dst
}

// boxShrink averages kx x ky blocks of the part r of img (premultiplied).
func boxShrink(img image.Image, r image.Rectangle, kx, ky int) *image.RGBA {
	if m, ok := img.(*image.YCbCr); ok {
		if out := boxShrinkYCbCr(m, r, kx, ky); out != nil {
			return out
		}
	}
	w, h := r.Dx()/kx, r.Dy()/ky
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	sums := make([]uint64, 4*w) // 64 bits: kx*ky can pass 2^24 pixels of 255
	n := uint64(kx * ky)
	row := rowReader(img)
	px := make([]uint8, 4*w*kx)
	for y := range h {
		clear(sums)
		for dy := range ky {
			row(px, r.Min.X, r.Min.Y+y*ky+dy, w*kx)
			for x := range w {
				s := sums[4*x : 4*x+4]
				for dx := range kx {
					p := px[4*(x*kx+dx) : 4*(x*kx+dx)+4]
					s[0] += uint64(p[0])
					s[1] += uint64(p[1])
					s[2] += uint64(p[2])
					s[3] += uint64(p[3])
				}
			}
		}
		out := dst.Pix[y*dst.Stride : y*dst.Stride+4*w]
		for i, s := range sums {
			out[i] = uint8((s + n/2) / n)
		}
	}
	return dst
}

// boxShrinkYCbCr is boxShrink for a decoded JPEG: each plane is averaged
// in place (the chroma planes at their own resolution), and only the small
// result is converted to RGB -- the conversion of every source pixel was a
// third of the time of a 12 MP variant. Nil for a subsampling it does not
// know.
func boxShrinkYCbCr(m *image.YCbCr, r image.Rectangle, kx, ky int) *image.RGBA {
	var hx, vy int // chroma subsampling factors
	switch m.SubsampleRatio {
	case image.YCbCrSubsampleRatio444:
		hx, vy = 1, 1
	case image.YCbCrSubsampleRatio422:
		hx, vy = 2, 1
	case image.YCbCrSubsampleRatio420:
		hx, vy = 2, 2
	case image.YCbCrSubsampleRatio440:
		hx, vy = 1, 2
	default:
		return nil
	}
	w, h := r.Dx()/kx, r.Dy()/ky
	ys := averagePlane(m.Y, m.YStride, r, kx, ky, 1, 1, m.Rect.Min)
	cbs := averagePlane(m.Cb, m.CStride, r, kx, ky, hx, vy, m.Rect.Min)
	crs := averagePlane(m.Cr, m.CStride, r, kx, ky, hx, vy, m.Rect.Min)
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range w * h {
		rr, gg, bb := color.YCbCrToRGB(ys[i], cbs[i], crs[i])
		o := 4 * i
		dst.Pix[o], dst.Pix[o+1], dst.Pix[o+2], dst.Pix[o+3] = rr, gg, bb, 0xff
	}
	return dst
}

// averagePlane averages, for each output sample, the kx x ky source
// pixels it covers in r, each pixel contributing the sample of a plane
// subsampled by (fx, fy) that holds it -- exactly what converting every
// pixel first would weigh, without converting. origin is the image's (the
// plane's first sample is origin divided by the factors, as image.YCbCr
// lays it).
func averagePlane(p []uint8, stride int, r image.Rectangle, kx, ky, fx, fy int, origin image.Point) []uint8 {
	w, h := r.Dx()/kx, r.Dy()/ky
	cols := make([]int, w*kx) // plane column of each source column
	for i := range cols {
		cols[i] = (r.Min.X+i)/fx - origin.X/fx
	}
	out := make([]uint8, w*h)
	sums := make([]uint64, w)
	n := uint64(kx * ky)
	for y := range h {
		clear(sums)
		for dy := range ky {
			row := p[((r.Min.Y+y*ky+dy)/fy-origin.Y/fy)*stride:]
			if fx == 1 { // contiguous: the luma plane, or unsubsampled chroma
				row = row[cols[0]:]
				for x := range w {
					var s uint64
					for _, v := range row[x*kx : x*kx+kx] {
						s += uint64(v)
					}
					sums[x] += s
				}
				continue
			}
			for x := range w {
				var s uint64
				for _, c := range cols[x*kx : x*kx+kx] {
					s += uint64(row[c])
				}
				sums[x] += s
			}
		}
		for x, s := range sums {
			out[y*w+x] = uint8((s + n/2) / n)
		}
	}
	return out
}

// rowReader returns a function that reads n premultiplied RGBA pixels of
// img starting at (x, y) into px, with fast paths for what the decoders
// return.
func rowReader(img image.Image) func(px []uint8, x, y, n int) {
	switch m := img.(type) {
	case *image.YCbCr:
		return func(px []uint8, x, y, n int) {
			for i := range n {
				yi, ci := m.YOffset(x+i, y), m.COffset(x+i, y)
				r, g, b := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
				px[4*i], px[4*i+1], px[4*i+2], px[4*i+3] = r, g, b, 0xff
			}
		}
	case *image.RGBA:
		return func(px []uint8, x, y, n int) {
			o := m.PixOffset(x, y)
			copy(px[:4*n], m.Pix[o:o+4*n])
		}
	case *image.Gray:
		return func(px []uint8, x, y, n int) {
			o := m.PixOffset(x, y)
			for i, v := range m.Pix[o : o+n] {
				px[4*i], px[4*i+1], px[4*i+2], px[4*i+3] = v, v, v, 0xff
			}
		}
	case *image.NRGBA:
		return func(px []uint8, x, y, n int) {
			o := m.PixOffset(x, y)
			for i := range n {
				premultiply(px[4*i:4*i+4], uint32(m.Pix[o+4*i])*0x101, uint32(m.Pix[o+4*i+1])*0x101, uint32(m.Pix[o+4*i+2])*0x101, uint32(m.Pix[o+4*i+3])*0x101)
			}
		}
	case *image.NRGBA64:
		return func(px []uint8, x, y, n int) {
			o := m.PixOffset(x, y)
			for i := range n {
				p := m.Pix[o+8*i : o+8*i+8]
				premultiply(px[4*i:4*i+4], uint32(p[0])<<8|uint32(p[1]), uint32(p[2])<<8|uint32(p[3]), uint32(p[4])<<8|uint32(p[5]), uint32(p[6])<<8|uint32(p[7]))
			}
		}
	case *image.Paletted:
		pal := make([][4]uint8, len(m.Palette))
		for i, c := range m.Palette {
			r, g, b, a := c.RGBA()
			pal[i] = [4]uint8{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}
		}
		return func(px []uint8, x, y, n int) {
			o := m.PixOffset(x, y)
			for i, v := range m.Pix[o : o+n] {
				if int(v) < len(pal) {
					copy(px[4*i:4*i+4], pal[v][:])
				} else {
					clear(px[4*i : 4*i+4]) // an index past the palette reads as transparent, as At does
				}
			}
		}
	}
	return func(px []uint8, x, y, n int) {
		for i := range n {
			r, g, b, a := img.At(x+i, y).RGBA()
			px[4*i], px[4*i+1], px[4*i+2], px[4*i+3] = uint8(r>>8), uint8(g>>8), uint8(b>>8), uint8(a>>8)
		}
	}
}

// premultiply writes the 8-bit premultiplied RGBA of the 16-bit
// non-premultiplied r, g, b, a into p, as color.NRGBA64's RGBA does.
func premultiply(p []uint8, r, g, b, a uint32) {
	p[0], p[1], p[2], p[3] = uint8(r*a/0xffff>>8), uint8(g*a/0xffff>>8), uint8(b*a/0xffff>>8), uint8(a>>8)
}

// orient turns an image stored with EXIF orientation o upright.
func orient(m *image.RGBA, o int) *image.RGBA {
	if o <= 1 || o > 8 {
		return m
	}
	b := m.Bounds()
	w, h := b.Dx(), b.Dy()
	ow, oh := w, h
	if o >= 5 {
		ow, oh = h, w
	}
	out := image.NewRGBA(image.Rect(0, 0, ow, oh))
	for y := range h {
		for x := range w {
			var dx, dy int
			switch o {
			case 2: // mirrored horizontally
				dx, dy = w-1-x, y
			case 3: // rotated 180
				dx, dy = w-1-x, h-1-y
			case 4: // mirrored vertically
				dx, dy = x, h-1-y
			case 5: // transposed
				dx, dy = y, x
			case 6: // rotated 90 clockwise to be upright
				dx, dy = h-1-y, x
			case 7: // transversed
				dx, dy = h-1-y, w-1-x
			case 8: // rotated 90 counter-clockwise to be upright
				dx, dy = y, w-1-x
			}
			si, di := m.PixOffset(x, y), out.PixOffset(dx, dy)
			copy(out.Pix[di:di+4], m.Pix[si:si+4])
		}
	}
	return out
}

// flatten composites m over white: JPEG has no alpha.
func flatten(m *image.RGBA) image.Image {
	if m.Opaque() {
		return m
	}
	out := image.NewRGBA(m.Bounds())
	draw.Draw(out, out.Bounds(), image.White, image.Point{}, draw.Src)
	draw.Draw(out, out.Bounds(), m, m.Bounds().Min, draw.Over)
	return out
}
