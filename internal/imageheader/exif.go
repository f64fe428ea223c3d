package imageheader

import (
	"bytes"
	"encoding/binary"
)

// webpAnimated reports a WebP whose VP8X header sets the animation flag
// (RIFF, then the VP8X chunk: flags in its first byte, bit 1).
func webpAnimated(src []byte) bool {
	if len(src) < 21 || string(src[0:4]) != "RIFF" || string(src[8:12]) != "WEBP" {
		return false
	}
	return string(src[12:16]) == "VP8X" && src[20]&0x02 != 0
}

// Orientation reads the EXIF orientation (tag 0x0112 of IFD0) of a JPEG:
// 1..8, or 1 when there is none, it is not a JPEG, or anything about it is
// malformed. Only the APP1 segments before the first scan are read, every
// offset bounds-checked (the input is hostile).
func Orientation(src []byte) int {
	if len(src) < 4 || src[0] != 0xFF || src[1] != 0xD8 {
		return 1
	}
	p := 2
	for p+4 <= len(src) {
		if src[p] != 0xFF {
			return 1
		}
		marker := src[p+1]
		if marker == 0xFF { // fill byte
			p++
			continue
		}
		if marker == 0xDA || marker == 0xD9 { // start of scan, end of image
			return 1
		}
		n := int(binary.BigEndian.Uint16(src[p+2:]))
		if n < 2 || p+2+n > len(src) {
			return 1
		}
		seg := src[p+4 : p+2+n]
		if marker == 0xE1 && bytes.HasPrefix(seg, []byte("Exif\x00\x00")) {
			if o := tiffOrientation(seg[6:]); o != 0 {
				return o
			}
		}
		p += 2 + n
	}
	return 1
}

// tiffOrientation reads the orientation from a TIFF structure (EXIF's
// body): 0 when it has none.
func tiffOrientation(t []byte) int {
	if len(t) < 8 {
		return 0
	}
	var bo binary.ByteOrder
	switch string(t[:2]) {
	case "II":
		bo = binary.LittleEndian
	case "MM":
		bo = binary.BigEndian
	default:
		return 0
	}
	if bo.Uint16(t[2:]) != 42 {
		return 0
	}
	ifd := int(bo.Uint32(t[4:]))
	if ifd < 8 || ifd+2 > len(t) {
		return 0
	}
	count := int(bo.Uint16(t[ifd:]))
	for i := range count {
		e := ifd + 2 + 12*i
		if e+12 > len(t) {
			return 0
		}
		if bo.Uint16(t[e:]) != 0x0112 || bo.Uint16(t[e+2:]) != 3 { // orientation, SHORT
			continue
		}
		if o := int(bo.Uint16(t[e+8:])); o >= 1 && o <= 8 {
			return o
		}
		return 0
	}
	return 0
}
