package httpapi

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"sync"
)

// favicon is the service's icon (an ICO holding one 32x32 PNG: an upward
// arrow on a rounded square), drawn once.
var favicon = sync.OnceValue(func() []byte {
	const n = 32
	img := image.NewNRGBA(image.Rect(0, 0, n, n))
	bg := color.NRGBA{R: 0x1f, G: 0x6f, B: 0xeb, A: 0xff}
	fg := color.NRGBA{R: 0xff, G: 0xff, B: 0xff, A: 0xff}
	for y := range n {
		for x := range n {
			// The rounded square: corners of radius 6 left transparent.
			dx, dy := max(6-x, x-(n-7), 0), max(6-y, y-(n-7), 0)
			if dx*dx+dy*dy > 36 {
				continue
			}
			img.SetNRGBA(x, y, bg)
			// The arrow: a triangle head over a shaft.
			head := y >= 6 && y < 16 && x >= 16-(y-5) && x < 16+(y-5)
			shaft := y >= 16 && y < 26 && x >= 13 && x < 19
			if head || shaft {
				img.SetNRGBA(x, y, fg)
			}
		}
	}
	var p bytes.Buffer
	_ = png.Encode(&p, img)
	var ico bytes.Buffer
	// ICONDIR (reserved, type 1 = icon, one image), then its ICONDIRENTRY
	// (width, height, colours, reserved, planes, bits, size, offset).
	_ = binary.Write(&ico, binary.LittleEndian, [3]uint16{0, 1, 1})
	_ = binary.Write(&ico, binary.LittleEndian, struct {
		W, H, Colors, Reserved uint8
		Planes, Bits           uint16
		Size, Offset           uint32
	}{n, n, 0, 0, 1, 32, uint32(p.Len()), 6 + 16})
	ico.Write(p.Bytes())
	return ico.Bytes()
})

// withFavicon answers GET /favicon.ico with the service's icon, with no
// token (a browser asks for it on every page of the origin; a 401 problem
// there is an error in the page's console).
func withFavicon(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/favicon.ico" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/x-icon")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(favicon())
	})
}
