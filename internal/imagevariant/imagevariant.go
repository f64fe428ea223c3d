// Package imagevariant makes a smaller copy of an uploaded image for a named
// preset: a width and height box, a fit, an output format and a quality.
//
// It reads hostile input, so the order is fixed: the header is read first
// and an image over Limits.MaxPixels, with a frame outside its canvas or
// with more than one frame to decode is refused before any pixel is
// decoded; then exactly one frame is decoded (a GIF's first), at most
// Limits.Concurrency generations run at once (so memory is bounded by
// Concurrency x PerSlotBytes), and a generation that outlives its
// context is abandoned to finish in the background while still holding its
// slot. The output is re-encoded from pixels: it never carries the input's
// metadata (EXIF, GPS, ICC, comments), and a JPEG's EXIF orientation is
// applied to the pixels first.
//
// Inputs: PNG, JPEG, GIF (first frame), WebP (still). Outputs: JPEG, PNG
// and lossless WebP (golang.org/x/image has no WebP encoder; nativewebp
// writes VP8L only, so Quality applies to JPEG alone). Pure Go.
package imagevariant

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"

	"github.com/HugoSmits86/nativewebp"
	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp" // registers the WebP decoder with image.Decode

	"github.com/uploadedfile/uploadedfile/internal/imageheader"
)

// Fit says how an image is fitted into a preset's box.
type Fit string

// The fits (the names sharp and CSS object-fit use).
const (
	// FitCover fills the box exactly, cropping the centre of the image.
	FitCover Fit = "cover"
	// FitContain fits the whole image inside the box and pads the rest
	// (transparent, or white for JPEG): the output is exactly the box.
	FitContain Fit = "contain"
	// FitInside fits the whole image inside the box, keeping its aspect
	// ratio; the output is at most the box.
	FitInside Fit = "inside"
)

// Format is an output encoding.
type Format string

// The output formats.
const (
	FormatJPEG Format = "jpeg"
	FormatPNG  Format = "png"
	FormatWebP Format = "webp"
)

// ContentType is the MIME type of the format's output.
func (f Format) ContentType() string { return "image/" + string(f) }

// Ext is the file extension of the format's output.
func (f Format) Ext() string {
	if f == FormatJPEG {
		return "jpg"
	}
	return string(f)
}

// MaxSide bounds a preset's width and height.
const MaxSide = 4096

// Spec is one preset: the box, the fit, the output format and quality.
type Spec struct {
	Width, Height int
	Fit           Fit
	Format        Format
	// Quality is the JPEG quality, 1..100 (0: 82).
	Quality int
}

// Validate reports what is wrong with a spec.
func (s Spec) Validate() error {
	switch {
	case s.Width < 1 || s.Height < 1 || s.Width > MaxSide || s.Height > MaxSide:
		return fmt.Errorf("width and height must be between 1 and %d", MaxSide)
	case s.Fit != FitCover && s.Fit != FitContain && s.Fit != FitInside:
		return fmt.Errorf("fit %q: must be cover, contain or inside", s.Fit)
	case s.Format != FormatJPEG && s.Format != FormatPNG && s.Format != FormatWebP:
		return fmt.Errorf("format %q: must be jpeg, png or webp", s.Format)
	case s.Quality < 0 || s.Quality > 100:
		return errors.New("quality must be between 1 and 100")
	}
	return nil
}

// Errors of Generate. Every other error is the context's.
var (
	// ErrUnsupported: not an image this package reads (or a corrupt one).
	ErrUnsupported = errors.New("imagevariant: not a supported image")
	// ErrTooManyPixels: the header declares more than Limits.MaxPixels.
	ErrTooManyPixels = errors.New("imagevariant: image has too many pixels")
	// ErrAnimated: the image needs more than one frame decoded (an animated
	// WebP); a GIF's first frame is used instead.
	ErrAnimated = errors.New("imagevariant: animated image")
)

// Limits bound what a Generator spends.
type Limits struct {
	// MaxPixels: images declaring more are refused (default 40 MP).
	MaxPixels int64
	// Concurrency: decodes at once (default 2).
	Concurrency int
}

// DefaultMaxPixels is the default of Limits.MaxPixels.
const DefaultMaxPixels = 40_000_000

// PerSlotBytes is the most memory one generation takes (one slot of
// Limits.Concurrency) for images of at most maxPixels and a preset box of
// at most boxPixels: the decoded frame and what the decoder holds beside
// it, at worst 28 bytes a declared pixel (a 16-bit RGBA PNG, Adam7
// interlaced: the frame at 8 bytes a pixel, a pass's image, row buffers,
// and the garbage collector's headroom over all of it), plus 96 bytes a
// pixel of the box (x/image/draw's kernel scaler keeps four float64s for
// each pixel of the box's width times each source row it reads, up to
// twice the box's height; then the scaled, upright, padded and encoded
// output; and the collector's headroom), plus 32 MiB.
// TestVariantMemoryIsBounded measures it on the worst case of every class
// the header reader accepts, for the largest box a preset can have.
func PerSlotBytes(maxPixels, boxPixels int64) int64 {
	return 28*maxPixels + 96*boxPixels + 32<<20
}

// Generator makes variants within its limits; safe for concurrent use.
type Generator struct {
	maxPixels int64
	slots     chan struct{}
}

// New returns a Generator with lim (zero values are the defaults).
func New(lim Limits) *Generator {
	if lim.MaxPixels <= 0 {
		lim.MaxPixels = DefaultMaxPixels
	}
	if lim.Concurrency <= 0 {
		lim.Concurrency = 2
	}
	return &Generator{maxPixels: lim.MaxPixels, slots: make(chan struct{}, lim.Concurrency)}
}

// Result is a generated variant.
type Result struct {
	Data          []byte
	Width, Height int
	ContentType   string
}

// Generate makes the variant of src for spec. It waits for a slot and for
// the work within ctx; on ctx's end it returns ctx's error at once, and the
// abandoned work keeps its slot until it stops.
func (g *Generator) Generate(ctx context.Context, src []byte, spec Spec) (Result, error) {
	if err := spec.Validate(); err != nil {
		return Result{}, err
	}
	hdr, err := g.inspect(src)
	if err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err // select would pick at random between a free slot and the end
	}
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	type outcome struct {
		r   Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() { <-g.slots }()
		r, err := generate(src, hdr, spec)
		done <- outcome{r, err}
	}()
	select {
	case o := <-done:
		return o.r, o.err
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// header is what the input declares before any pixel is decoded.
type header struct {
	format        string
	width, height int // as stored
	orientation   int // EXIF orientation 1..8 (1: as stored)
}

// inspect reads the header: the format, the declared size against the
// pixel limit, the frame count, and a JPEG's orientation.
func (g *Generator) inspect(src []byte) (header, error) {
	h, err := imageheader.Read(src)
	if err != nil {
		return header{}, ErrUnsupported
	}
	if int64(h.Width)*int64(h.Height) > g.maxPixels {
		return header{}, ErrTooManyPixels
	}
	if h.Animated {
		return header{}, ErrAnimated
	}
	return header{format: h.Format, width: h.Width, height: h.Height, orientation: h.Orientation}, nil
}

// generate decodes one frame, fits it and encodes it.
func generate(src []byte, hdr header, spec Spec) (Result, error) {
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
func decode(src []byte, hdr header, _ Spec) (image.Image, int, error) {
	if hdr.format == "gif" {
		img, err := gif.Decode(bytes.NewReader(src))
		return img, 1, err
	}
	img, _, err := image.Decode(bytes.NewReader(src))
	return img, 1, err
}

// shrink is the factor the preset scales the image by.
func shrink(hdr header, spec Spec) float64 {
	uw, uh := hdr.upright()
	w, h := float64(uw), float64(uh)
	bw, bh := float64(spec.Width), float64(spec.Height)
	if spec.Fit == FitCover {
		return math.Max(bw/w, bh/h)
	}
	return math.Min(bw/w, bh/h)
}

// upright is the size of the image as shown: its stored size, transposed
// for EXIF orientations 5 to 8.
func (hdr header) upright() (w, h int) {
	if hdr.orientation >= 5 {
		return hdr.height, hdr.width
	}
	return hdr.width, hdr.height
}

// fit scales img, the image hdr describes decoded at 1/denom of its
// size, into spec's box and returns the upright result. Sizes and the
// crop are computed on the image as stored, so a scaled decode changes
// neither.
func fit(img image.Image, denom int, hdr header, spec Spec) *image.RGBA {
	o := hdr.orientation
	w, h := hdr.upright()
	bw, bh := float64(spec.Width), float64(spec.Height)
	scale := shrink(hdr, spec)
	// The upright size of the scaled image and, for cover, the upright
	// part of the source it shows.
	sw, sh := side(float64(w)*scale), side(float64(h)*scale)
	crop := image.Rect(0, 0, w, h)
	if spec.Fit == FitCover {
		sw, sh = spec.Width, spec.Height
		cw, ch := min(w, side(bw/scale)), min(h, side(bh/scale))
		crop = image.Rect((w-cw)/2, (h-ch)/2, (w-cw)/2+cw, (h-ch)/2+ch)
	}
	// Scale in stored orientation, then turn the small result upright.
	srcRect, dw, dh := crop, sw, sh
	if o >= 5 {
		srcRect, dw, dh = image.Rect(crop.Min.Y, crop.Min.X, crop.Max.Y, crop.Max.X), sh, sw
	}
	// A flip mirrors the crop onto itself (it is centred), so only the
	// transposition matters. The rectangle is in the canvas's coordinates,
	// where every decoder puts its image (a GIF's first frame stands at
	// its own place in it; the rest of the canvas reads as transparent).
	srcRect = scaleRect(srcRect, denom, img.Bounds().Max)
	scaled := scaleTo(img, srcRect, dw, dh)
	upright := orient(scaled, o)
	if spec.Fit != FitContain {
		return upright
	}
	canvas := image.NewRGBA(image.Rect(0, 0, spec.Width, spec.Height))
	off := image.Pt((spec.Width-sw)/2, (spec.Height-sh)/2)
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

// side rounds a scaled length, never below one pixel.
func side(v float64) int { return max(1, int(math.Round(v))) }

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
