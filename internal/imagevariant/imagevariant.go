// Package imagevariant makes a smaller copy of an uploaded image for a named
// preset: a width and height box, a fit, an output format and a quality.
//
// It reads hostile input, so the order is fixed: the header is read first
// (internal/imageheader) and an image over Limits.MaxPixels, or one with
// more than one frame to decode, is refused before any pixel is decoded;
// then at most Limits.Concurrency generations run at once (so memory is
// bounded by Concurrency x PerSlotBytes), and a generation that outlives
// its context is abandoned to finish in the background while still
// holding its slot. The pixel work is an Engine's: it decodes exactly one
// frame (a GIF's first), applies a JPEG's EXIF orientation, fits and
// encodes from pixels, so the output never carries the input's metadata
// (EXIF, GPS, ICC, comments).
//
// Engines: "go" (every build: golang.org/x/image; JPEG, PNG and lossless
// WebP output) and "vips" (built with the vips tag: libvips through
// govips, shrink-on-load, lossy WebP and AVIF output, its cache off and
// its untrusted loaders blocked). New uses the first of Engines(): vips
// when it is built in. Inputs: PNG, JPEG, GIF (first frame), WebP (still).
package imagevariant

import (
	"context"
	"errors"
	"fmt"

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
	// FormatAVIF is written by the vips engine only.
	FormatAVIF Format = "avif"
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

// MaxJPEGSide is the longest side of a JPEG any engine reads (libjpeg's
// limit; longer ones are ErrUnsupported on every engine).
const MaxJPEGSide = 65500

// MaxSide bounds a preset's width and height.
const MaxSide = 4096

// Spec is one preset: the box, the fit, the output format and quality.
type Spec struct {
	Width, Height int
	Fit           Fit
	Format        Format
	// Quality is the JPEG quality, and the quality of the vips engine's
	// lossy WebP and AVIF, 1..100 (0: 82).
	Quality int
}

// Validate reports what is wrong with the variant's Spec.
func (s Spec) Validate() error {
	switch {
	case s.Width < 1 || s.Height < 1 || s.Width > MaxSide || s.Height > MaxSide:
		return fmt.Errorf("width and height must be between 1 and %d", MaxSide)
	case s.Fit != FitCover && s.Fit != FitContain && s.Fit != FitInside:
		return fmt.Errorf("fit %q: must be cover, contain or inside", s.Fit)
	case s.Format != FormatJPEG && s.Format != FormatPNG && s.Format != FormatWebP && s.Format != FormatAVIF:
		return fmt.Errorf("format %q: must be jpeg, png, webp or avif", s.Format)
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
	// ErrFormat: the engine does not write the Spec's format (AVIF without
	// the vips engine).
	ErrFormat = errors.New("imagevariant: the image engine does not write this format")
)

// Limits bound what a Generator spends.
type Limits struct {
	// MaxPixels: images declaring more are refused (default 40 MP).
	MaxPixels int64
	// Concurrency: decodes at once (default 2).
	Concurrency int
	// Engine does the pixel work (nil: the first of Engines()).
	Engine Engine
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
	engine    Engine
}

// New returns a Generator with lim (zero values are the defaults).
func New(lim Limits) *Generator {
	if lim.MaxPixels <= 0 {
		lim.MaxPixels = DefaultMaxPixels
	}
	if lim.Concurrency <= 0 {
		lim.Concurrency = 2
	}
	if lim.Engine == nil {
		lim.Engine = Engines()[0]
	}
	return &Generator{maxPixels: lim.MaxPixels, slots: make(chan struct{}, lim.Concurrency), engine: lim.Engine}
}

// Engine is the engine the Generator's pixel work runs on.
func (g *Generator) Engine() Engine { return g.engine }

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
	if err := g.accepts(spec); err != nil {
		return Result{}, err
	}
	hdr, err := g.inspect(src)
	if err != nil {
		return Result{}, err
	}
	if err := g.acquire(ctx); err != nil {
		return Result{}, err
	}
	return g.run(ctx, src, hdr, spec)
}

// GenerateFrom is Generate for a source that read fetches once a slot is
// free: the slot bounds the source's bytes in memory as well as their
// decode, so its caller needs no bound of its own -- one bound on variant
// work, Limits.Concurrency. read's error is returned as it is.
func (g *Generator) GenerateFrom(ctx context.Context, read func(context.Context) ([]byte, error), spec Spec) (Result, error) {
	if err := g.accepts(spec); err != nil {
		return Result{}, err
	}
	if err := g.acquire(ctx); err != nil {
		return Result{}, err
	}
	src, err := read(ctx)
	if err != nil {
		<-g.slots
		return Result{}, err
	}
	hdr, err := g.inspect(src)
	if err != nil {
		<-g.slots
		return Result{}, err
	}
	return g.run(ctx, src, hdr, spec)
}

// accepts checks spec against this Generator's engine.
func (g *Generator) accepts(spec Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if !Writes(g.engine, spec.Format) {
		return ErrFormat
	}
	return nil
}

// acquire takes a slot within ctx.
func (g *Generator) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err // select would pick at random between a free slot and the end
	}
	select {
	case g.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run does the engine's work on a slot the caller holds, and gives the
// slot back when the work stops -- after ctx's end if it outlives it.
func (g *Generator) run(ctx context.Context, src []byte, hdr imageheader.Header, spec Spec) (Result, error) {
	type outcome struct {
		r   Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() { <-g.slots }()
		r, err := g.engine.Make(src, hdr, spec)
		done <- outcome{r, err}
	}()
	select {
	case o := <-done:
		return o.r, o.err
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// inspect reads the header: the format, the declared size against the
// pixel limit, and the frame count.
func (g *Generator) inspect(src []byte) (imageheader.Header, error) {
	h, err := imageheader.Read(src)
	if err != nil {
		return imageheader.Header{}, ErrUnsupported
	}
	if int64(h.Width)*int64(h.Height) > g.maxPixels {
		return imageheader.Header{}, ErrTooManyPixels
	}
	if h.Format == "jpeg" && max(h.Width, h.Height) > MaxJPEGSide {
		return imageheader.Header{}, ErrUnsupported
	}
	if h.Animated {
		return imageheader.Header{}, ErrAnimated
	}
	return h, nil
}
