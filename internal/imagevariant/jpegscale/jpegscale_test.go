package jpegscale

import (
	"bytes"
	"errors"
	"image"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// The testdata files are image/jpeg's own (Go's image/testdata): every
// subsampling, progressive and sequential, restart intervals, separate DC
// progressions, grayscale, RGB and CMYK.
var scaled = []string{
	"video-001.jpeg",
	"video-001.progressive.jpeg",
	"video-001.progressive.truncated.jpeg", // its last scans are missing, its EOI is not
	"video-001.221212.jpeg",                // luma 2x2, chroma 1x2: 4:2:2 from taller blocks
	"video-001.q50.410.jpeg",
	"video-001.q50.410.progressive.jpeg",
	"video-001.q50.411.jpeg",
	"video-001.q50.411.progressive.jpeg",
	"video-001.q50.420.jpeg",
	"video-001.q50.420.progressive.jpeg",
	"video-001.q50.422.jpeg",
	"video-001.q50.422.progressive.jpeg",
	"video-001.q50.440.jpeg",
	"video-001.q50.440.progressive.jpeg",
	"video-001.q50.444.jpeg",
	"video-001.q50.444.progressive.jpeg",
	"video-001.restart2.jpeg",
	"video-001.separate.dc.progression.jpeg",
	"video-001.separate.dc.progression.progressive.jpeg",
	"video-005.gray.jpeg",
	"video-005.gray.q50.jpeg",
	"video-005.gray.q50.progressive.jpeg",
	"video-005.gray.q50.2x2.jpeg",
	"video-005.gray.q50.2x2.progressive.jpeg",
}

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeEighthIsTheBlockMeans: each sample is the mean of its 8x8
// block of image/jpeg's full decode, plane by plane, for every kind of
// JPEG the package scales.
func TestDecodeEighthIsTheBlockMeans(t *testing.T) {
	for _, name := range scaled {
		t.Run(name, func(t *testing.T) {
			src := read(t, name)
			compareWithFull(t, src)
		})
	}
}

// TestDecodeEighthOfALargePhoto: a photo-like 4:2:0 image and a grayscale
// one, sizes not multiples of the MCU, as Go's encoder writes them.
func TestDecodeEighthOfALargePhoto(t *testing.T) {
	color := photo(1203, 805)
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, color, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	compareWithFull(t, buf.Bytes())
	gray := image.NewGray(color.Bounds())
	for i := range gray.Pix {
		gray.Pix[i] = color.Pix[4*i+1]
	}
	buf.Reset()
	if err := jpeg.Encode(&buf, gray, &jpeg.Options{Quality: 75}); err != nil {
		t.Fatal(err)
	}
	compareWithFull(t, buf.Bytes())
}

// TestDecodeEighthRefusesWhatItDoesNotScale: RGB and CMYK JPEGs are
// ErrUnsupported (the caller decodes them in full); a truncated one and
// one without EOI are errors, as image/jpeg has them.
func TestDecodeEighthRefusesWhatItDoesNotScale(t *testing.T) {
	for _, name := range []string{"video-001.rgb.jpeg", "video-001.cmyk.jpeg"} {
		if _, err := jpeg.Decode(bytes.NewReader(read(t, name))); err != nil {
			t.Fatalf("%s: image/jpeg: %v", name, err)
		}
		if _, err := DecodeEighth(read(t, name)); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
	}
	src := read(t, "video-001.jpeg")
	for name, b := range map[string][]byte{
		"cut in its scan": src[:len(src)/2],
		"no EOI":          src[:len(src)-2],
		"empty":           nil,
		"not a JPEG":      []byte("GIF89a"),
	} {
		if m, err := DecodeEighth(b); err == nil {
			t.Errorf("%s: decoded %v, want an error", name, m.Bounds())
		}
	}
}

// TestDecodeEighthOfCorruptInput: random corruptions of every test file
// never panic, and whatever decodes has the declared size.
func TestDecodeEighthOfCorruptInput(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, name := range append(scaled, "video-001.rgb.jpeg", "video-001.cmyk.jpeg") {
		orig := read(t, name)
		for range 300 {
			b := bytes.Clone(orig)
			for range 1 + rnd.IntN(8) {
				b[rnd.IntN(len(b))] = byte(rnd.IntN(256))
			}
			if rnd.IntN(4) == 0 {
				b = b[:rnd.IntN(len(b))]
			}
			m, err := DecodeEighth(b)
			if err != nil {
				continue
			}
			cfg, err := jpeg.DecodeConfig(bytes.NewReader(b))
			if err != nil {
				continue // a corrupt header both could read differently
			}
			if got, want := m.Bounds().Size(), image.Pt((cfg.Width+7)/8, (cfg.Height+7)/8); got != want {
				t.Fatalf("%s corrupted: size %v, want %v", name, got, want)
			}
		}
	}
}

// FuzzDecodeEighth: no input panics or decodes to another size than its
// header declares.
func FuzzDecodeEighth(f *testing.F) {
	for _, name := range scaled {
		f.Add(read(f, name))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if cfg, err := jpeg.DecodeConfig(bytes.NewReader(b)); err != nil || cfg.Width*cfg.Height > 1<<22 {
			return
		}
		m, err := DecodeEighth(b)
		if err != nil {
			return
		}
		cfg, _ := jpeg.DecodeConfig(bytes.NewReader(b))
		if got, want := m.Bounds().Size(), image.Pt((cfg.Width+7)/8, (cfg.Height+7)/8); got != want {
			t.Fatalf("size %v, want %v", got, want)
		}
	})
}

// compareWithFull checks DecodeEighth against the block means of
// image/jpeg's decode: within 1.5 levels (its integer IDCT rounds each
// pixel) and under half a level on average, over the blocks it did not
// clip (a clipped pixel moves the mean; the DC is not clipped).
func compareWithFull(t *testing.T, src []byte) {
	t.Helper()
	full, err := jpeg.Decode(bytes.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	small, err := DecodeEighth(src)
	if err != nil {
		t.Fatal(err)
	}
	fb := full.Bounds()
	if got, want := small.Bounds(), image.Rect(0, 0, (fb.Dx()+7)/8, (fb.Dy()+7)/8); got != want {
		t.Fatalf("bounds %v, want %v", got, want)
	}
	var worst, sum, n float64
	plane := func(name string, f, s []byte, fStride, sStride, w, h int) {
		for y := range h {
			for x := range w {
				var m float64
				clipped := false
				for dy := range 8 {
					for dx := range 8 {
						v := f[(8*y+dy)*fStride+8*x+dx]
						m += float64(v)
						clipped = clipped || v == 0 || v == 255
					}
				}
				if clipped {
					continue // the full decode clipped a pixel: its mean is not the block's
				}
				diff := math.Abs(m/64 - float64(s[y*sStride+x]))
				if diff > worst {
					worst = diff
				}
				sum += diff
				n++
				if diff > 1.5 {
					t.Fatalf("%s plane at (%d,%d): %v, full decode's block mean %.2f", name, x, y, s[y*sStride+x], m/64)
				}
			}
		}
	}
	switch f := full.(type) {
	case *image.Gray:
		s := small.(*image.Gray)
		plane("gray", f.Pix, s.Pix, f.Stride, s.Stride, s.Rect.Dx(), s.Rect.Dy())
	case *image.YCbCr:
		s, ok := small.(*image.YCbCr)
		if !ok || s.SubsampleRatio != f.SubsampleRatio {
			t.Fatalf("scaled %T, want YCbCr %v", small, f.SubsampleRatio)
		}
		// The blocks that hold a pixel of the image (a progressive scan of
		// one component codes no others; the planes run to the MCU's edge).
		w, h := s.Rect.Dx(), s.Rect.Dy()
		hr, vr := s.YStride/s.CStride, (len(s.Y)/s.YStride)/(len(s.Cb)/s.CStride)
		plane("Y", f.Y, s.Y, f.YStride, s.YStride, w, h)
		plane("Cb", f.Cb, s.Cb, f.CStride, s.CStride, (w+hr-1)/hr, (h+vr-1)/vr)
		plane("Cr", f.Cr, s.Cr, f.CStride, s.CStride, (w+hr-1)/hr, (h+vr-1)/vr)
	default:
		t.Fatalf("full decode is %T", full)
	}
	if mean := sum / n; mean > 0.5 {
		t.Errorf("mean difference %.2f levels (worst %.2f)", mean, worst)
	}
}

// photo is a photo-like RGBA image: gradients, edges and noise.
func photo(w, h int) *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	rnd := rand.New(rand.NewPCG(3, 4))
	for y := range h {
		for x := range w {
			fx, fy := float64(x)/float64(w), float64(y)/float64(h)
			n := float64(rnd.IntN(24))
			r := 128 + 100*math.Sin(6*fx+2*fy)
			g := 128 + 90*math.Cos(5*fy-3*fx)
			b := 100 + 80*math.Sin(9*fx*fy)
			if (x/150+y/150)%2 == 0 {
				r, g = g, r
			}
			o := m.PixOffset(x, y)
			m.Pix[o], m.Pix[o+1], m.Pix[o+2], m.Pix[o+3] = uint8(min(255, r+n)), uint8(min(255, g+n)), uint8(min(255, b+n)), 255
		}
	}
	return m
}

func BenchmarkDecodeEighth(b *testing.B) {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, photo(4000, 3000), &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	src := buf.Bytes()
	b.Run("eighth", func(b *testing.B) {
		for range b.N {
			if _, err := DecodeEighth(src); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("image-jpeg", func(b *testing.B) {
		for range b.N {
			if _, err := jpeg.Decode(bytes.NewReader(src)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
