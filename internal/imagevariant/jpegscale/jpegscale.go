// Copyright 2009 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package jpegscale decodes a JPEG at an eighth of its size in each
// direction, from the DC coefficient of each 8x8 block: the block's mean,
// so one sample per block, with no inverse DCT. It is what libjpeg's
// "scale 1/8" and libvips' shrink-on-load do, and what a thumbnail of a
// large photo needs: the entropy decoding still reads every coefficient,
// but the IDCT and the writing of 64 samples per block, most of a full
// decode's time, are gone, and a progressive JPEG's AC scans are skipped
// whole.
//
// It is a fork of the Go standard library's image/jpeg (marker parsing,
// Huffman tables and scan structure follow it closely; LICENSE in this
// directory), reading from a byte slice with a 64-bit bit buffer. It
// decodes grayscale and YCbCr images, baseline, extended and progressive;
// for the rest (RGB-transformed and 4-component JPEGs) it returns
// ErrUnsupported and the caller decodes in full.
//
// Corrupt input never panics and never runs unbounded: every scan walks a
// fixed number of blocks, and a scan that needs bits past the end of its
// data is an error, as in image/jpeg. Memory is one int32 per 8x8 block
// the frame header declares, plus the output; a caller bounds the declared
// size first (imagevariant refuses images over its pixel limit before any
// decode).
package jpegscale

import (
	"errors"
	"image"
)

// FormatError reports that the input is not a valid JPEG.
type FormatError string

func (e FormatError) Error() string { return "jpegscale: invalid JPEG format: " + string(e) }

// ErrUnsupported: a valid JPEG this package does not scale (RGB or
// 4-component, or a feature image/jpeg does not read either); decode it in
// full instead.
var ErrUnsupported = errors.New("jpegscale: unsupported JPEG for scaled decoding")

// component is a frame component, specified in section B.2.2.
type component struct {
	h  int   // horizontal sampling factor
	v  int   // vertical sampling factor
	c  uint8 // component identifier
	tq uint8 // quantization table selector
}

const (
	blockSize = 64

	dcTable = 0
	acTable = 1
	maxTc   = 1
	maxTh   = 3
	maxTq   = 3

	maxComponents = 4
)

const (
	sof0Marker  = 0xc0 // Start Of Frame (Baseline Sequential)
	sof1Marker  = 0xc1 // Start Of Frame (Extended Sequential)
	sof2Marker  = 0xc2 // Start Of Frame (Progressive)
	dhtMarker   = 0xc4 // Define Huffman Table
	rst0Marker  = 0xd0 // ReSTart (0)
	rst7Marker  = 0xd7 // ReSTart (7)
	soiMarker   = 0xd8 // Start Of Image
	eoiMarker   = 0xd9 // End Of Image
	sosMarker   = 0xda // Start Of Scan
	dqtMarker   = 0xdb // Define Quantization Table
	driMarker   = 0xdd // Define Restart Interval
	comMarker   = 0xfe // COMment
	app0Marker  = 0xe0
	app14Marker = 0xee
	app15Marker = 0xef
)

// decoder holds the state of one DecodeEighth.
type decoder struct {
	src []byte
	pos int // next unread byte of src
	bits

	width, height int
	nComp         int
	comp          [maxComponents]component
	baseline      bool
	progressive   bool
	jfif          bool
	adobeValid    bool
	adobeXform    uint8
	ri            int // restart interval, in MCUs

	huff  [maxTc + 1][maxTh + 1]huffman
	quant [maxTq + 1]int32 // each table's DC quantizer: all a DC decode needs

	// mxx, myy: MCUs across and down. dc holds each block's dequantization-
	// ready DC coefficient per component (progressive: summed over scans).
	mxx, myy int
	dc       [maxComponents][]int32
	seen     [maxComponents]bool // a DC scan covered the component
}

// DecodeEighth decodes src at 1/8 scale: an *image.Gray or *image.YCbCr of
// ceil(width/8) x ceil(height/8), each sample the mean of its 8x8 block
// (chroma at the JPEG's own subsampling). It returns ErrUnsupported for a
// JPEG it does not scale, a FormatError for a corrupt one.
func DecodeEighth(src []byte) (image.Image, error) {
	d := decoder{src: src}
	if err := d.decode(); err != nil {
		return nil, err
	}
	return d.image()
}

// decode reads the markers up to the End Of Image, decoding every scan.
func (d *decoder) decode() error {
	if len(d.src) < 2 || d.src[0] != 0xff || d.src[1] != soiMarker {
		return FormatError("missing SOI marker")
	}
	d.pos = 2
	for {
		marker, err := d.nextMarker()
		if err != nil {
			return err
		}
		if marker == eoiMarker {
			return nil
		}
		if rst0Marker <= marker && marker <= rst7Marker {
			continue // a stray restart marker after the last scan, as image/jpeg allows
		}
		seg, err := d.segment()
		if err != nil {
			return err
		}
		if err := d.process(marker, seg); err != nil {
			return err
		}
	}
}

// nextMarker skips to the next marker and returns its code. Like libjpeg
// and image/jpeg, it ignores extraneous bytes before it and fill bytes.
func (d *decoder) nextMarker() (byte, error) {
	for {
		if d.pos+1 >= len(d.src) {
			return 0, FormatError("missing EOI marker")
		}
		if d.src[d.pos] != 0xff {
			d.pos++
			continue
		}
		m := d.src[d.pos+1]
		switch m {
		case 0x00: // a stuffed byte: extraneous data
			d.pos += 2
		case 0xff: // a fill byte
			d.pos++
		default:
			d.pos += 2
			return m, nil
		}
	}
}

// segment reads a marker segment's length and returns its payload.
func (d *decoder) segment() ([]byte, error) {
	if d.pos+2 > len(d.src) {
		return nil, FormatError("short segment")
	}
	n := int(d.src[d.pos])<<8 | int(d.src[d.pos+1])
	if n < 2 {
		return nil, FormatError("short segment length")
	}
	if d.pos+n > len(d.src) {
		return nil, FormatError("short segment")
	}
	seg := d.src[d.pos+2 : d.pos+n]
	d.pos += n
	return seg, nil
}

// process handles one marker segment.
func (d *decoder) process(marker byte, seg []byte) error {
	switch marker {
	case sof0Marker, sof1Marker, sof2Marker:
		d.baseline = marker == sof0Marker
		d.progressive = marker == sof2Marker
		return d.processSOF(seg)
	case dhtMarker:
		return d.processDHT(seg)
	case dqtMarker:
		return d.processDQT(seg)
	case sosMarker:
		return d.processSOS(seg)
	case driMarker:
		if len(seg) != 2 {
			return FormatError("DRI has wrong length")
		}
		d.ri = int(seg[0])<<8 | int(seg[1])
	case app0Marker:
		d.jfif = len(seg) >= 5 && string(seg[:5]) == "JFIF\x00"
	case app14Marker:
		if len(seg) >= 12 && string(seg[:5]) == "Adobe" {
			d.adobeValid, d.adobeXform = true, seg[11]
		}
	default:
		if app0Marker <= marker && marker <= app15Marker || marker == comMarker {
			return nil
		}
		if marker < 0xc0 {
			return FormatError("unknown marker")
		}
		return ErrUnsupported // lossless, hierarchical, arithmetic coding
	}
	return nil
}

// processSOF reads the frame header (section B.2.2) and refuses what this
// package does not scale.
func (d *decoder) processSOF(seg []byte) error {
	if d.nComp != 0 {
		return FormatError("multiple SOF markers")
	}
	switch len(seg) {
	case 6 + 3*1:
		d.nComp = 1
	case 6 + 3*3:
		d.nComp = 3
	case 6 + 3*4:
		return ErrUnsupported // CMYK or YCbCrK
	default:
		return FormatError("SOF has wrong length")
	}
	if seg[0] != 8 {
		return ErrUnsupported // 12-bit precision
	}
	d.height = int(seg[1])<<8 | int(seg[2])
	d.width = int(seg[3])<<8 | int(seg[4])
	if d.width == 0 || d.height == 0 {
		return FormatError("zero size")
	}
	if int(seg[5]) != d.nComp {
		return FormatError("SOF has wrong length")
	}
	for i := range d.nComp {
		c := &d.comp[i]
		c.c = seg[6+3*i]
		for j := range i {
			if c.c == d.comp[j].c {
				return FormatError("repeated component identifier")
			}
		}
		c.tq = seg[8+3*i]
		if c.tq > maxTq {
			return FormatError("bad Tq value")
		}
		hv := seg[7+3*i]
		h, v := int(hv>>4), int(hv&0x0f)
		if h < 1 || 4 < h || v < 1 || 4 < v || h == 3 || v == 3 {
			return ErrUnsupported
		}
		if d.nComp == 1 {
			h, v = 1, 1 // a single component is non-interleaved (section A.2)
		} else {
			// image/jpeg's YCbCr ratios: 4:4:4, 4:4:0, 4:2:2, 4:2:0, 4:1:1,
			// 4:1:0, both chroma components alike.
			switch i {
			case 0:
				if v == 4 {
					return ErrUnsupported
				}
			case 1:
				if d.comp[0].h%h != 0 || d.comp[0].v%v != 0 {
					return ErrUnsupported
				}
			case 2:
				if d.comp[1].h != h || d.comp[1].v != v {
					return ErrUnsupported
				}
			}
		}
		c.h, c.v = h, v
	}
	if d.nComp == 3 {
		if _, ok := subsampling[d.chromaSampling()]; !ok {
			return ErrUnsupported
		}
	}
	h0, v0 := d.comp[0].h, d.comp[0].v
	d.mxx = (d.width + 8*h0 - 1) / (8 * h0)
	d.myy = (d.height + 8*v0 - 1) / (8 * v0)
	for i := range d.nComp {
		d.dc[i] = make([]int32, d.mxx*d.comp[i].h*d.myy*d.comp[i].v)
	}
	return nil
}

// processDQT reads quantization tables (section B.2.4.1); only each
// table's first (DC) entry matters here.
func (d *decoder) processDQT(seg []byte) error {
	for len(seg) > 0 {
		pq, tq := seg[0]>>4, seg[0]&0x0f
		if tq > maxTq {
			return FormatError("bad Tq value")
		}
		switch pq {
		case 0:
			if len(seg) < 1+blockSize {
				return FormatError("DQT has wrong length")
			}
			d.quant[tq] = int32(seg[1])
			seg = seg[1+blockSize:]
		case 1:
			if len(seg) < 1+2*blockSize {
				return FormatError("DQT has wrong length")
			}
			d.quant[tq] = int32(seg[1])<<8 | int32(seg[2])
			seg = seg[1+2*blockSize:]
		default:
			return FormatError("bad Pq value")
		}
	}
	return nil
}

// image writes the scaled image from the blocks' DC coefficients.
func (d *decoder) image() (image.Image, error) {
	if d.nComp == 0 {
		return nil, FormatError("missing SOF marker")
	}
	if d.nComp == 3 && d.isRGB() {
		return nil, ErrUnsupported
	}
	for i := range d.nComp {
		if !d.seen[i] {
			return nil, FormatError("missing SOS marker")
		}
	}
	w, h := (d.width+7)/8, (d.height+7)/8
	if d.nComp == 1 {
		full := image.NewGray(image.Rect(0, 0, d.mxx, d.myy))
		d.fill(full.Pix, full.Stride, 0)
		return full.SubImage(image.Rect(0, 0, w, h)), nil
	}
	h0, v0 := d.comp[0].h, d.comp[0].v
	full := image.NewYCbCr(image.Rect(0, 0, h0*d.mxx, v0*d.myy), subsampling[d.chromaSampling()])
	d.fill(full.Y, full.YStride, 0)
	d.fill(full.Cb, full.CStride, 1)
	d.fill(full.Cr, full.CStride, 2)
	return full.SubImage(image.Rect(0, 0, w, h)), nil
}

// fill writes component i's samples: a block's mean is its dequantized DC
// coefficient over 8 (the 2-D IDCT's DC basis), level-shifted by 128.
func (d *decoder) fill(dst []byte, stride, i int) {
	q := d.quant[d.comp[i].tq]
	across := d.mxx * d.comp[i].h
	for k, c := range d.dc[i] {
		v := (c*q+4)>>3 + 128
		dst[(k/across)*stride+k%across] = uint8(min(max(v, 0), 255))
	}
}

// subsampling maps the luma-to-chroma sampling ratio (chromaSampling) to
// the image.YCbCr layout of the same name: image/jpeg's 4:4:4, 4:4:0,
// 4:2:2, 4:2:0, 4:1:1 and 4:1:0.
var subsampling = map[int]image.YCbCrSubsampleRatio{
	0x11: image.YCbCrSubsampleRatio444,
	0x12: image.YCbCrSubsampleRatio440,
	0x21: image.YCbCrSubsampleRatio422,
	0x22: image.YCbCrSubsampleRatio420,
	0x41: image.YCbCrSubsampleRatio411,
	0x42: image.YCbCrSubsampleRatio410,
}

// chromaSampling is a 3-component frame's luma sampling over its chroma
// sampling, horizontal in the high nibble, vertical in the low.
func (d *decoder) chromaSampling() int {
	return d.comp[0].h/d.comp[1].h<<4 | d.comp[0].v/d.comp[1].v
}

// isRGB reports whether a 3-component JPEG holds RGB rather than YCbCr,
// as image/jpeg decides it.
func (d *decoder) isRGB() bool {
	if d.jfif {
		return false
	}
	if d.adobeValid && d.adobeXform == 0 {
		return true
	}
	return d.comp[0].c == 'R' && d.comp[1].c == 'G' && d.comp[2].c == 'B'
}
