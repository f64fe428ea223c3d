package imagevariant

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/HugoSmits86/nativewebp"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/procstat"
)

// memoryTestPixels is the pixel limit of the memory test: lower than the
// default so that its inputs are quick to make, high enough that the bound
// is the per-pixel term's and not the constant's.
const memoryTestPixels = 8_000_000

// memoryTestBox is the side of the largest box the memory test asks for:
// half of MaxSide, so that the box's term in the bound is measured too,
// in a quarter of the time.
const memoryTestBox = MaxSide / 2

// worstCases are the inputs that cost the most memory per declared pixel,
// each class of what the header reader accepts, at the pixel limit: 16-bit
// colour, Adam7 interlace, palettes, extreme aspect ratios both ways, and
// every format's largest frame.
func worstCases(t *testing.T) map[string]func() []byte {
	const m = memoryTestPixels
	side := 2828 // side*side just under m
	enc := func(f func(*bytes.Buffer) error) func() []byte {
		return func() []byte {
			var b bytes.Buffer
			require.NoError(t, f(&b))
			return b.Bytes()
		}
	}
	pal := color.Palette{color.Black, color.White, color.Transparent}
	return map[string]func() []byte{
		"png 16-bit RGBA":            enc(func(b *bytes.Buffer) error { return png.Encode(b, image.NewNRGBA64(image.Rect(0, 0, side, side))) }),
		"png 16-bit RGBA interlaced": func() []byte { return interlacedPNG(side, side) },
		"png palette": enc(func(b *bytes.Buffer) error {
			return png.Encode(b, image.NewPaletted(image.Rect(0, 0, side, side), pal))
		}),
		"png one row, 16-bit": enc(func(b *bytes.Buffer) error { return png.Encode(b, image.NewNRGBA64(image.Rect(0, 0, m, 1))) }),
		"png one column":      enc(func(b *bytes.Buffer) error { return png.Encode(b, image.NewGray(image.Rect(0, 0, 1, m))) }),
		"jpeg 4:4:4": enc(func(b *bytes.Buffer) error {
			return jpeg.Encode(b, image.NewYCbCr(image.Rect(0, 0, side, side), image.YCbCrSubsampleRatio444), nil)
		}),
		"jpeg widest": enc(func(b *bytes.Buffer) error {
			return jpeg.Encode(b, image.NewGray(image.Rect(0, 0, MaxJPEGSide, m/MaxJPEGSide)), nil)
		}),
		"gif": enc(func(b *bytes.Buffer) error {
			return gif.Encode(b, image.NewPaletted(image.Rect(0, 0, side, side), pal), nil)
		}),
		"gif widest": enc(func(b *bytes.Buffer) error {
			return gif.Encode(b, image.NewPaletted(image.Rect(0, 0, 65535, m/65535), pal), nil)
		}),
		"webp (lossless)": enc(func(b *bytes.Buffer) error {
			return nativewebp.Encode(b, image.NewNRGBA(image.Rect(0, 0, 16383, m/16383)), nil)
		}),
	}
}

// TestVariantMemoryIsBounded runs each worst case on each engine of this
// build in a child process of its own -- Limits.Concurrency generations at
// once, each for a small and a large preset box -- and holds the child's
// peak resident memory (VmHWM, past what it held before: Go's heap and
// libvips' C allocations alike) to the documented bound, Concurrency x
// PerSlotBytes(MaxPixels, the largest box). The child is this package's
// tests built with this build's engines and without the race detector
// (whose shadow memory would be measured too).
func TestVariantMemoryIsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	child := filepath.Join(dir, "imagevariant.test")
	args := []string{"test", "-c", "-o", child}
	if _, ok := EngineNamed("vips"); ok {
		args = append(args, "-tags", "vips")
	}
	build := exec.Command("go", append(args, ".")...)
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build the child without -race: %s", out)
	bound := 2 * PerSlotBytes(memoryTestPixels, memoryTestBox*memoryTestBox)
	var mu sync.Mutex
	var lines []string
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2) // two children at a time: each measures only itself
	for _, e := range Engines() {
		for name := range worstCases(nil) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				cmd := exec.Command(child, "-test.run=^TestVariantMemoryChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), "UF_VARIANT_CASE="+name, "UF_VARIANT_ENGINE="+e.Name())
				out, err := cmd.CombinedOutput()
				mu.Lock()
				defer mu.Unlock()
				if !assertNoError(t, err, "%s on %s: %s", name, e.Name(), out) {
					return
				}
				peak := parsePeak(t, string(out))
				lines = append(lines, fmt.Sprintf("%-4s %-28s %6d MiB (bound %d MiB)", e.Name(), name, peak>>20, bound>>20))
				if peak > bound {
					t.Errorf("%s on %s: peak %d MiB over the bound of %d MiB", name, e.Name(), peak>>20, bound>>20)
				}
			}()
		}
	}
	wg.Wait()
	slices.Sort(lines)
	t.Logf("peak memory of 2 generations at once, %d MP limit:\n%s", memoryTestPixels/1_000_000, strings.Join(lines, "\n"))
}

func assertNoError(t *testing.T, err error, format string, args ...any) bool {
	if err != nil {
		t.Errorf(format, args...)
		return false
	}
	return true
}

func parsePeak(t *testing.T, out string) int64 {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "peak-bytes="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no peak in the child's output: %s", out)
	return 0
}

// TestVariantMemoryChild is the child of TestVariantMemoryIsBounded: it
// generates from and prints its peak memory past its
// baseline. Without the variable it checks nothing and returns.
func TestVariantMemoryChild(t *testing.T) {
	name := os.Getenv("UF_VARIANT_CASE")
	if name == "" {
		return // run by TestVariantMemoryIsBounded only
	}
	make, ok := worstCases(t)[name]
	require.True(t, ok, name)
	engine, ok := EngineNamed(os.Getenv("UF_VARIANT_ENGINE"))
	require.True(t, ok, "UF_VARIANT_ENGINE names no engine of this build")
	src := make()
	// What making the input took is given back and forgotten: the peak
	// counts from here (clear_refs 5 resets VmHWM to the current RSS).
	debug.FreeOSMemory()
	require.NoError(t, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0))
	base := vmHWM(t)
	g := New(Limits{MaxPixels: memoryTestPixels, Concurrency: 2, Engine: engine})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, spec := range []Spec{
				{Width: 320, Height: 240, Fit: FitInside, Format: FormatJPEG},
				{Width: memoryTestBox, Height: memoryTestBox, Fit: FitCover, Format: FormatPNG},
				{Width: memoryTestBox, Height: memoryTestBox, Fit: FitContain, Format: FormatJPEG},
			} {
				_, err := g.Generate(context.Background(), src, spec)
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("peak-bytes=%d\n", vmHWM(t)-base)
}

// vmHWM is this process's peak resident memory.
func vmHWM(t *testing.T) int64 {
	n, err := procstat.VmHWM("self")
	require.NoError(t, err)
	return n
}

// interlacedPNG is a w x h 16-bit RGBA PNG, Adam7-interlaced (image/png
// writes no interlaced PNG): the costliest PNG to decode per pixel.
func interlacedPNG(w, h int) []byte {
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(data)))
		out.Write(l[:])
		c := crc32.NewIEEE()
		c.Write([]byte(typ))
		c.Write(data)
		out.WriteString(typ)
		out.Write(data)
		binary.BigEndian.PutUint32(l[:], c.Sum32())
		out.Write(l[:])
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9], ihdr[12] = 16, 6, 1 // 16-bit, RGBA, Adam7
	chunk("IHDR", ihdr)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	// Adam7: each pass's first column and row, and its column and row step.
	for _, p := range [7][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}} {
		pw, ph := (w-p[0]+p[2]-1)/p[2], (h-p[1]+p[3]-1)/p[3]
		if pw <= 0 || ph <= 0 {
			continue
		}
		row := make([]byte, 1+8*pw) // filter type 0, then the pixels
		for i := 1; i < len(row); i++ {
			row[i] = byte(i * 37)
		}
		for range ph {
			_, _ = zw.Write(row)
		}
	}
	_ = zw.Close()
	chunk("IDAT", z.Bytes())
	chunk("IEND", nil)
	return out.Bytes()
}

// FuzzGenerate: whatever the header reader accepts decodes and resizes
// without a panic, within the pixel limit, into the box.
func FuzzGenerate(f *testing.F) {
	for _, src := range [][]byte{interlacedPNG(9, 7), encodeSeed(f, "png"), encodeSeed(f, "jpeg"), encodeSeed(f, "gif")} {
		f.Add(src, uint8(0))
		f.Add(src, uint8(1))
	}
	g := New(Limits{MaxPixels: 1 << 16, Concurrency: 1})
	f.Fuzz(func(t *testing.T, src []byte, fit uint8) {
		spec := Spec{Width: 7, Height: 5, Fit: []Fit{FitCover, FitContain, FitInside}[int(fit)%3], Format: FormatPNG}
		r, err := g.Generate(context.Background(), src, spec)
		if err != nil {
			return
		}
		require.LessOrEqual(t, r.Width, spec.Width)
		require.LessOrEqual(t, r.Height, spec.Height)
		require.Positive(t, r.Width)
		require.Positive(t, r.Height)
	})
}

func encodeSeed(f *testing.F, format string) []byte {
	m := image.NewNRGBA(image.Rect(0, 0, 13, 3))
	for i := range m.Pix {
		m.Pix[i] = uint8(i * 11)
	}
	var b bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&b, m)
	case "jpeg":
		err = jpeg.Encode(&b, m, nil)
	case "gif":
		err = gif.Encode(&b, m, nil)
	}
	if err != nil {
		f.Fatal(err)
	}
	return b.Bytes()
}
