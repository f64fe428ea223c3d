package imagevariant

import (
	"image"
	"math"

	"github.com/uploadedfile/uploadedfile/internal/imageheader"
)

// layout is a preset's geometry on one image, the same for every engine:
// the part of the stored image it shows and the size that part is scaled
// to. Every size is bounded by the image or the box -- an image thousands
// of times wider than tall is cropped before it is scaled, never scaled
// whole -- so no engine is asked for an intermediate larger than both.
type layout struct {
	// crop is the part of the image shown, in stored pixels (cover shows
	// the centre; inside and contain show all of it).
	crop image.Rectangle
	// dw, dh is the size crop is scaled to, in stored orientation.
	dw, dh int
	// sw, sh is the upright size of the scaled image (dw, dh turned by
	// the EXIF orientation).
	sw, sh int
}

// plan lays out spec on the image hdr describes.
func plan(hdr imageheader.Header, spec Spec) layout {
	o := hdr.Orientation
	w, h := hdr.Upright()
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
	// Scaled in stored orientation, then turned upright. A flip mirrors
	// the crop onto itself (it is centred), so only the transposition
	// matters.
	l := layout{crop: crop, dw: sw, dh: sh, sw: sw, sh: sh}
	if o >= 5 {
		l.crop, l.dw, l.dh = image.Rect(crop.Min.Y, crop.Min.X, crop.Max.Y, crop.Max.X), sh, sw
	}
	return l
}

// shrink is the factor the preset scales the image by.
func shrink(hdr imageheader.Header, spec Spec) float64 {
	uw, uh := hdr.Upright()
	w, h := float64(uw), float64(uh)
	bw, bh := float64(spec.Width), float64(spec.Height)
	if spec.Fit == FitCover {
		return math.Max(bw/w, bh/h)
	}
	return math.Min(bw/w, bh/h)
}

// side rounds a scaled length, never below one pixel.
func side(v float64) int { return max(1, int(math.Round(v))) }
