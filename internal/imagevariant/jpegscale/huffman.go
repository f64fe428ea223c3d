// Copyright 2009 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package jpegscale

import "encoding/binary"

const (
	maxCodeLength = 16  // bits in the longest Huffman code
	maxNCodes     = 256 // codes in a table
	lutBits       = 9   // bits the look-up table resolves at once
)

// huffman is a Huffman decoder, specified in section C.
type huffman struct {
	nCodes int32
	// lut maps the next lutBits bits to the value (high 8 bits) and the
	// code length (low 8 bits) of a code that short, or 0.
	lut         [1 << lutBits]uint16
	vals        [maxNCodes]uint8
	minCodes    [maxCodeLength]int32 // -1: no code of that length
	maxCodes    [maxCodeLength]int32
	valsIndices [maxCodeLength]int32
}

// processDHT reads Huffman tables (section B.2.4.2).
func (d *decoder) processDHT(seg []byte) error {
	for len(seg) > 0 {
		if len(seg) < 17 {
			return FormatError("DHT has wrong length")
		}
		tc, th := seg[0]>>4, seg[0]&0x0f
		if tc > maxTc {
			return FormatError("bad Tc value")
		}
		if th > maxTh || (d.baseline && th > 1) {
			return FormatError("bad Th value")
		}
		h := &d.huff[tc][th]
		var nCodes [maxCodeLength]int32
		h.nCodes = 0
		for i := range nCodes {
			nCodes[i] = int32(seg[1+i])
			h.nCodes += nCodes[i]
		}
		if h.nCodes == 0 {
			return FormatError("Huffman table has zero length")
		}
		if h.nCodes > maxNCodes {
			return FormatError("Huffman table has excessive length")
		}
		if len(seg) < 17+int(h.nCodes) {
			return FormatError("DHT has wrong length")
		}
		copy(h.vals[:], seg[17:17+h.nCodes])
		seg = seg[17+h.nCodes:]

		clear(h.lut[:])
		var x, code uint32
		for i := uint32(0); i < lutBits; i++ {
			code <<= 1
			for range nCodes[i] {
				// Every lutBits-bit sequence starting with this (1+i)-bit
				// code decodes to it.
				base := code << (lutBits - 1 - i)
				v := uint16(h.vals[x])<<8 | uint16(1+i)
				for k := range uint32(1) << (lutBits - 1 - i) {
					if base|k < 1<<lutBits {
						h.lut[base|k] = v
					}
				}
				code++
				x++
			}
		}
		var c, index int32
		for i, n := range nCodes {
			if n == 0 {
				h.minCodes[i], h.maxCodes[i], h.valsIndices[i] = -1, -1, -1
			} else {
				h.minCodes[i], h.maxCodes[i], h.valsIndices[i] = c, c+n-1, index
				c += n
				index += n
			}
			c <<= 1
		}
	}
	return nil
}

// bits is the entropy-coded data's bit reader: the low n bits of acc are
// unread, most significant first. At a marker (or the end of src) it
// supplies zero bits, counted in pad, rather than read past it; a scan
// that used any of them ran out of data.
type bits struct {
	acc uint64
	n   uint
	pad uint
}

// refill tops the buffer up to more than 56 bits. Eight bytes without a
// 0xFF (no stuffing, no marker) are taken at once.
func (d *decoder) refill() {
	if d.pos+8 <= len(d.src) {
		x := binary.BigEndian.Uint64(d.src[d.pos:])
		if nx := ^x; (nx-0x0101010101010101)&^nx&0x8080808080808080 == 0 {
			k := (64 - d.n) / 8 // whole bytes that fit
			d.acc = d.acc<<(8*k) | x>>(64-8*k)
			d.n += 8 * k
			d.pos += int(k)
			return
		}
	}
	for d.n <= 56 {
		var c byte
		switch {
		case d.pos >= len(d.src):
			d.pad += 8
		case d.src[d.pos] != 0xff:
			c = d.src[d.pos]
			d.pos++
		case d.pos+1 < len(d.src) && d.src[d.pos+1] == 0x00:
			c = 0xff
			d.pos += 2
		default: // a marker: stay at it
			d.pad += 8
		}
		d.acc = d.acc<<8 | uint64(c)
		d.n += 8
	}
}

// peek returns the next k bits (k <= 32, after a refill).
func (d *decoder) peek(k uint) uint32 { return uint32(d.acc>>(d.n-k)) & (1<<k - 1) }

// decodeHuffman returns the next Huffman-coded value.
func (d *decoder) decodeHuffman(h *huffman) (uint8, error) {
	if d.n < 32 {
		d.refill()
	}
	if v := h.lut[d.peek(lutBits)]; v != 0 {
		d.n -= uint(v & 0xff)
		return uint8(v >> 8), nil
	}
	if h.nCodes == 0 {
		return 0, FormatError("uninitialized Huffman table")
	}
	code := int32(0)
	for i := range maxCodeLength {
		code = code<<1 | int32(d.peek(1))
		d.n--
		if code <= h.maxCodes[i] {
			return h.vals[h.valsIndices[i]+code-h.minCodes[i]], nil
		}
	}
	return 0, FormatError("bad Huffman code")
}

// receiveExtend reads t bits (t <= 16) as a signed value (section F.2.2.1).
func (d *decoder) receiveExtend(t uint8) int32 {
	if t == 0 {
		return 0
	}
	if d.n < 32 {
		d.refill()
	}
	x := int32(d.peek(uint(t)))
	d.n -= uint(t)
	if x < 1<<(t-1) {
		x += -1<<t + 1
	}
	return x
}

// decodeBits reads t unsigned bits (t <= 16).
func (d *decoder) decodeBits(t uint) uint32 {
	if d.n < 32 {
		d.refill()
	}
	x := d.peek(t)
	d.n -= t
	return x
}

// skipBits drops t bits (t <= 16).
func (d *decoder) skipBits(t uint) {
	if d.n < 32 {
		d.refill()
	}
	d.n -= t
}

// resetBits starts the bit reader afresh (a scan or a restart interval),
// reporting whether the previous one used bits past its data.
func (d *decoder) resetBits() error {
	short := d.pad > d.n
	d.bits = bits{}
	if short {
		return FormatError("short Huffman data")
	}
	return nil
}
