//go:build vips

package imagevariant

// #cgo pkg-config: vips
// #include <vips/vips.h>
//
// // lockDown blocks every loader libvips marks untrusted, and every other
// // loader but the four formats this package reads (libvips 8.13+).
// static void lockDown(void) {
//   vips_block_untrusted_set(TRUE);
//   vips_operation_block_set("VipsForeignLoad", TRUE);
//   vips_operation_block_set("VipsForeignLoadJpeg", FALSE);
//   vips_operation_block_set("VipsForeignLoadPng", FALSE);
//   vips_operation_block_set("VipsForeignLoadGif", FALSE);
//   vips_operation_block_set("VipsForeignLoadNsgif", FALSE);
//   vips_operation_block_set("VipsForeignLoadWebp", FALSE);
// }
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"sync"

	"github.com/davidbyttow/govips/v2/vips"

	"github.com/uploadedfile/uploadedfile/internal/imageheader"
)

func init() {
	builtIn = append([]Engine{vipsEngine{}}, builtIn...)
}

// vipsStart starts libvips once per process: one worker thread per
// operation (the Generator bounds the operations), its operation cache
// off (every input is new; a cache would only hold memory), the untrusted
// loaders blocked, its log lines at WARN and above through slog.
var vipsStart = sync.OnceFunc(func() {
	vips.LoggingSettings(func(domain string, level vips.LogLevel, msg string) {
		slog.Warn("libvips", "domain", domain, "message", msg)
	}, vips.LogLevelWarning)
	vips.Startup(&vips.Config{ConcurrencyLevel: 1, MaxCacheFiles: 0, MaxCacheMem: 0, MaxCacheSize: 0})
	C.lockDown()
})

// vipsEngine is libvips through govips, on the same layout as the go
// engine (plan): the image loaded once -- a JPEG shrunk on load by up to
// 8 -- then the shown part cut out, scaled (alpha premultiplied), turned
// upright, padded for contain, flattened on white for JPEG, and exported
// with every piece of metadata stripped. Lossy WebP and AVIF at
// Spec.Quality. vips_thumbnail is not used: it scales the whole image
// before it crops, so a cover of a 65535 x 122 GIF asked it for a
// 1.1-million-pixel-wide intermediate (18 GB), and a box ratio that
// rounds a side to 0 aborts the process.
type vipsEngine struct{}

// Name implements Engine.
func (vipsEngine) Name() string { return "vips" }

// Version implements Engine: libvips' version.
func (vipsEngine) Version() string { return "libvips " + vips.Version }

// Formats implements Engine.
func (vipsEngine) Formats() []Format {
	return []Format{FormatJPEG, FormatPNG, FormatWebP, FormatAVIF}
}

// Make implements Engine.
func (vipsEngine) Make(src []byte, hdr imageheader.Header, spec Spec) (Result, error) {
	vipsStart()
	if hdr.Width > vipsMaxWidth {
		return vipsFromGo(src, hdr, spec)
	}
	l := plan(hdr, spec)
	var img *vips.ImageRef
	var err error
	if hdr.Format != "jpeg" && thumbnailFits(hdr, spec) {
		img, err = vipsThumbnail(src, spec, l)
	} else {
		img, err = vipsPlanned(src, hdr, spec, l)
	}
	if err != nil {
		return Result{}, err
	}
	defer img.Close()
	data, err := vipsExport(img, spec)
	if err != nil {
		return Result{}, fmt.Errorf("imagevariant: vips: encode: %w", err)
	}
	return Result{Data: data, Width: img.Width(), Height: img.Height(), ContentType: spec.Format.ContentType()}, nil
}

// vipsMaxWidth is the widest image libvips fits itself. Only a PNG can be
// wider, and libvips keeps several whole lines for each operation of a
// pipeline: a 16-bit RGBA PNG one row of 8 million pixels took 75 bytes a
// pixel. The go engine fits those (28 bytes a pixel at most, see
// PerSlotBytes) and libvips encodes its result.
const vipsMaxWidth = 65535

// vipsFromGo fits src with the go engine into a PNG of at most the box,
// then makes the variant of that PNG (which fills or fits the box already,
// so it is not scaled again).
func vipsFromGo(src []byte, hdr imageheader.Header, spec Spec) (Result, error) {
	lossless := spec
	lossless.Format = FormatPNG
	fitted, err := generate(src, hdr, lossless)
	if err != nil {
		return Result{}, err
	}
	h, err := imageheader.Read(fitted.Data)
	if err != nil {
		return Result{}, fmt.Errorf("imagevariant: vips: the go engine's PNG: %w", err)
	}
	return vipsEngine{}.Make(fitted.Data, h, spec)
}

// thumbnailFits reports whether vips_thumbnail may fit the image: the
// whole image scaled to cover (or fit) the box -- the intermediate it
// makes before it crops -- is at most four boxes, and neither of its sides
// rounds below two pixels. That is every photo-like image; for a PNG, GIF
// or WebP it streams the input (never decoded whole) and shrinks a WebP on
// load. Any other geometry, and every JPEG, takes vipsPlanned: libvips'
// thumbnail shrinks a JPEG on load by half the factor it could (leaving
// two for the resize), vipsLoad by the whole of it, as sharp does -- 25%
// faster for a 12 MP photo into 400x300.
func thumbnailFits(hdr imageheader.Header, spec Spec) bool {
	w, h := hdr.Upright()
	s := shrink(hdr, spec)
	iw, ih := float64(w)*s, float64(h)*s
	return iw >= 2 && ih >= 2 && iw*ih <= 4*float64(spec.Width)*float64(spec.Height)
}

// vipsThumbnail fits src with vips_thumbnail (which applies the EXIF
// orientation), then pads it for contain.
func vipsThumbnail(src []byte, spec Spec, l layout) (*vips.ImageRef, error) {
	crop := vips.InterestingNone
	if spec.Fit == FitCover {
		crop = vips.InterestingCentre
	}
	img, err := vips.LoadThumbnailFromBuffer(src, spec.Width, spec.Height, crop, vips.SizeBoth, nil)
	if err != nil {
		return nil, ErrUnsupported
	}
	if err := vipsFinish(img, spec); err != nil {
		img.Close()
		return nil, fmt.Errorf("imagevariant: vips: %w", err)
	}
	return img, nil
}

// vipsPlanned fits src by plan's layout, step by step.
func vipsPlanned(src []byte, hdr imageheader.Header, spec Spec, l layout) (*vips.ImageRef, error) {
	img, denom, err := vipsLoad(src, hdr, l)
	if err != nil {
		return nil, ErrUnsupported
	}
	if err := vipsFit(img, denom, hdr, spec, l); err != nil {
		img.Close()
		return nil, fmt.Errorf("imagevariant: vips: %w", err)
	}
	return img, nil
}

// vipsLoad decodes one frame (a GIF's first, composed on its canvas),
// without turning it upright, with the denominator of its scale: a JPEG
// is shrunk on load by the largest of 8, 4 or 2 that keeps the shown part
// at least the size it is scaled to.
func vipsLoad(src []byte, hdr imageheader.Header, l layout) (*vips.ImageRef, int, error) {
	p := vips.NewImportParams()
	p.AutoRotate.Set(false)
	denom := 1
	if hdr.Format == "jpeg" {
		for _, d := range []int{8, 4, 2} {
			if l.crop.Dx()/d >= l.dw && l.crop.Dy()/d >= l.dh {
				denom = d
				break
			}
		}
		p.JpegShrinkFactor.Set(denom)
	}
	img, err := vips.LoadImageFromBuffer(src, p)
	if err != nil {
		return nil, 0, err
	}
	return img, denom, nil
}

// vipsFit does on img what fit does in Go.
func vipsFit(img *vips.ImageRef, denom int, hdr imageheader.Header, spec Spec, l layout) error {
	r := scaleRect(l.crop, denom, image.Pt(img.Width(), img.Height()))
	if r != image.Rect(0, 0, img.Width(), img.Height()) {
		if err := img.ExtractArea(r.Min.X, r.Min.Y, r.Dx(), r.Dy()); err != nil {
			return err
		}
	}
	if r.Dx() != l.dw || r.Dy() != l.dh {
		// ResizeWithVScale premultiplies the alpha around the resize.
		err := img.ResizeWithVScale(float64(l.dw)/float64(r.Dx()), float64(l.dh)/float64(r.Dy()), vips.KernelLanczos3)
		if err != nil {
			return err
		}
	}
	// vips_resize rounds each side: make it exactly dw x dh.
	if img.Width() != l.dw || img.Height() != l.dh {
		if err := img.EmbedBackgroundRGBA(0, 0, max(img.Width(), l.dw), max(img.Height(), l.dh), &vips.ColorRGBA{}); err != nil {
			return err
		}
		if err := img.ExtractArea(0, 0, l.dw, l.dh); err != nil {
			return err
		}
	}
	if err := vipsOrient(img, hdr.Orientation); err != nil {
		return err
	}
	return vipsFinish(img, spec)
}

// vipsFinish makes the fitted, upright img 8-bit sRGB and pads it for
// contain.
func vipsFinish(img *vips.ImageRef, spec Spec) error {
	// Grey, 16-bit and palette images leave as 8-bit sRGB, as the go
	// engine's do.
	if img.Interpretation() != vips.InterpretationSRGB || img.BandFormat() != vips.BandFormatUchar {
		if err := img.ToColorSpace(vips.InterpretationSRGB); err != nil {
			return err
		}
		if err := img.Cast(vips.BandFormatUchar); err != nil {
			return err
		}
	}
	if spec.Fit == FitContain && (img.Width() != spec.Width || img.Height() != spec.Height) {
		if !img.HasAlpha() {
			if err := img.AddAlpha(); err != nil {
				return err
			}
		}
		return img.EmbedBackgroundRGBA((spec.Width-img.Width())/2, (spec.Height-img.Height())/2, spec.Width, spec.Height, &vips.ColorRGBA{})
	}
	return nil
}

// vipsOrient turns an image stored with EXIF orientation o upright.
func vipsOrient(img *vips.ImageRef, o int) error {
	angle, flip := vips.Angle0, false
	switch o {
	case 2:
		flip = true
	case 3:
		angle = vips.Angle180
	case 4:
		angle, flip = vips.Angle180, true
	case 5:
		angle, flip = vips.Angle90, true
	case 6:
		angle = vips.Angle90
	case 7:
		angle, flip = vips.Angle270, true
	case 8:
		angle = vips.Angle270
	}
	if angle != vips.Angle0 {
		if err := img.Rotate(angle); err != nil {
			return err
		}
	}
	if flip {
		return img.Flip(vips.DirectionHorizontal)
	}
	return nil
}

// vipsExport encodes img in spec's format, without metadata.
func vipsExport(img *vips.ImageRef, spec Spec) ([]byte, error) {
	q := spec.Quality
	if q == 0 {
		q = 82
	}
	var data []byte
	var err error
	switch spec.Format {
	case FormatJPEG:
		if img.HasAlpha() {
			if err := img.Flatten(&vips.Color{R: 255, G: 255, B: 255}); err != nil {
				return nil, err
			}
		}
		data, _, err = img.ExportJpeg(&vips.JpegExportParams{StripMetadata: true, Quality: q, OptimizeCoding: true})
	case FormatPNG:
		data, _, err = img.ExportPng(&vips.PngExportParams{StripMetadata: true, Compression: 6})
	case FormatWebP:
		data, _, err = img.ExportWebp(&vips.WebpExportParams{StripMetadata: true, Quality: q, ReductionEffort: 4})
		if err == nil {
			// libvips 8.14's webpsave writes a fresh EXIF chunk even when
			// told to strip: take it (and any XMP or ICC) out.
			data, err = webpWithoutMetadata(data)
		}
	case FormatAVIF:
		data, _, err = img.ExportAvif(&vips.AvifExportParams{StripMetadata: true, Quality: q, Bitdepth: 8, Effort: 4})
	default:
		return nil, ErrFormat
	}
	return data, err
}

// webpWithoutMetadata returns a WebP file without its EXIF, XMP and ICCP
// chunks and with the VP8X flags that announce them cleared.
func webpWithoutMetadata(b []byte) ([]byte, error) {
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WEBP" {
		return nil, errors.New("imagevariant: vips: webpsave wrote no WebP")
	}
	out := append(make([]byte, 0, len(b)), b[:12]...)
	for p := 12; p < len(b); {
		if p+8 > len(b) {
			return nil, errors.New("imagevariant: vips: webpsave wrote a truncated chunk")
		}
		size := int(binary.LittleEndian.Uint32(b[p+4:]))
		end := p + 8 + size + size&1
		if size > len(b) || end > len(b) {
			return nil, errors.New("imagevariant: vips: webpsave wrote a truncated chunk")
		}
		switch string(b[p : p+4]) {
		case "EXIF", "XMP ", "ICCP":
		case "VP8X":
			chunk := append([]byte{}, b[p:end]...)
			if size >= 1 {
				chunk[8] &^= 0x20 | 0x08 | 0x04 // ICC, EXIF, XMP
			}
			out = append(out, chunk...)
		default:
			out = append(out, b[p:end]...)
		}
		p = end
	}
	binary.LittleEndian.PutUint32(out[4:], uint32(len(out)-8))
	return out, nil
}
