package imagevariant

import (
	"slices"

	"github.com/uploadedfile/uploadedfile/internal/imageheader"
)

// Engine does a variant's pixel work: decode exactly one frame of src
// (whose header the Generator has read and checked), apply its EXIF
// orientation, fit it into the Spec's box and encode it, carrying none of
// the input's metadata. The Generator bounds the work around it: the pixel
// limit, the slots, the context.
type Engine interface {
	// Name names the engine: "go" or "vips".
	Name() string
	// Version is the version of the library doing the work
	// (golang.org/x/image's, libvips'), "" when unknown.
	Version() string
	// Formats lists the output formats it writes.
	Formats() []Format
	// Make makes the variant.
	Make(src []byte, h imageheader.Header, spec Spec) (Result, error)
}

// builtIn are the engines of this build, the preferred first (a vips
// build adds its engine in front).
var builtIn = []Engine{goEngine{}}

// Engines lists the engines built into this binary, the preferred first.
func Engines() []Engine { return slices.Clone(builtIn) }

// EngineNamed is the built-in engine called name.
func EngineNamed(name string) (Engine, bool) {
	for _, e := range builtIn {
		if e.Name() == name {
			return e, true
		}
	}
	return nil, false
}

// Describe names e and its library's version: "vips 8.14.1".
func Describe(e Engine) string {
	if v := e.Version(); v != "" {
		return e.Name() + " " + v
	}
	return e.Name()
}

// Writes reports whether e writes format f.
func Writes(e Engine, f Format) bool { return slices.Contains(e.Formats(), f) }
