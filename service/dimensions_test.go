package service_test

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/HugoSmits86/nativewebp"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

// imageOf encodes a w x h image in format.
func imageOf(t *testing.T, format string, w, h int) []byte {
	t.Helper()
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range m.Pix {
		m.Pix[i] = byte(i * 7)
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
	case "webp":
		err = nativewebp.Encode(&b, m, nil)
	}
	require.NoError(t, err)
	return b.Bytes()
}

// rotated is a JPEG with EXIF orientation 6 (a quarter turn) after its
// SOI.
func rotated(j []byte) []byte {
	var tiff bytes.Buffer
	tiff.WriteString("Exif\x00\x00II*\x00\x08\x00\x00\x00\x01\x00")
	_ = binary.Write(&tiff, binary.LittleEndian, []uint16{0x0112, 3})
	_ = binary.Write(&tiff, binary.LittleEndian, uint32(1))
	_ = binary.Write(&tiff, binary.LittleEndian, []uint16{6, 0})
	_ = binary.Write(&tiff, binary.LittleEndian, uint32(0))
	seg := []byte{0xFF, 0xE1, 0, 0}
	binary.BigEndian.PutUint16(seg[2:], uint16(tiff.Len()+2))
	out := append(append(append([]byte{}, j[:2]...), seg...), tiff.Bytes()...)
	return append(out, j[2:]...)
}

// TestImageDimensionsAreStored: an image's width and height as shown are
// read from its header at upload -- buffer and direct, every image type,
// a JPEG's EXIF orientation applied -- stored on its row and returned;
// other types, and an image whose header cannot be read, have none.
func TestImageDimensionsAreStored(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			cases := []struct {
				name, contentType string
				body              []byte
				w, h              int32 // 0: none
			}{
				{"a.png", "image/png", imageOf(t, "png", 31, 17), 31, 17},
				{"a.jpg", "image/jpeg", imageOf(t, "jpeg", 40, 10), 40, 10},
				{"turned.jpg", "image/jpeg", rotated(imageOf(t, "jpeg", 40, 10)), 10, 40},
				{"a.gif", "image/gif", imageOf(t, "gif", 9, 12), 9, 12},
				{"a.webp", "image/webp", imageOf(t, "webp", 16, 8), 16, 8},
				{"r.pdf", "application/pdf", []byte(pdf), 0, 0},
				// The PNG signature, then no readable header: accepted (the
				// checks read the signature), no size.
				{"broken.png", "image/png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00"), 0, 0},
			}
			check := func(how string, r *service.Result, w, h int32) {
				t.Helper()
				row := b.row(r.ID)
				if w == 0 {
					require.Nil(t, row.Width, "%s %s", how, r.OriginalName)
					require.Nil(t, r.Width)
					return
				}
				require.NotNil(t, row.Width, "%s %s", how, r.OriginalName)
				require.Equal(t, [2]int32{w, h}, [2]int32{*row.Width, *row.Height}, "%s %s", how, r.OriginalName)
				require.Equal(t, [2]int32{w, h}, [2]int32{*r.Width, *r.Height})
			}
			for _, c := range cases {
				r, err := b.svc.Upload(alice, bytes.NewReader(c.body), c.name, nil)
				require.NoError(t, err, c.name)
				check("buffer", r, c.w, c.h)

				init, err := b.svc.InitiateUpload(alice, input(strings.Replace(c.name, ".", "-direct.", 1), c.contentType, c.body), nil)
				require.NoError(t, err, c.name)
				b.write(alice, init, c.body)
				done, err := b.svc.CompleteUpload(alice, init.ID.String())
				require.NoError(t, err, c.name)
				check("direct", done, c.w, c.h)

				found, err := b.svc.Find(alice, r.ID.String())
				require.NoError(t, err)
				check("detail", found, c.w, c.h)
			}
		})
	}
}
