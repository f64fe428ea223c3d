// Copyright 2012 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package jpegscale

// scanComp is one component of a scan.
type scanComp struct {
	compIndex uint8
	td, ta    uint8 // DC and AC table selectors
}

// processSOS reads a scan header (section B.2.3) and decodes the scan's
// DC coefficients. A progressive AC scan holds none: it is skipped to
// the next marker without decoding.
func (d *decoder) processSOS(seg []byte) error {
	if d.nComp == 0 {
		return FormatError("missing SOF marker")
	}
	if len(seg) < 6 || 4+2*d.nComp < len(seg) || len(seg)%2 != 0 {
		return FormatError("SOS has wrong length")
	}
	nComp := int(seg[0])
	if len(seg) != 4+2*nComp {
		return FormatError("SOS length inconsistent with number of components")
	}
	var scan [maxComponents]scanComp
	totalHV := 0
	for i := range nComp {
		cs := seg[1+2*i]
		compIndex := -1
		for j, comp := range d.comp[:d.nComp] {
			if cs == comp.c {
				compIndex = j
			}
		}
		if compIndex < 0 {
			return FormatError("unknown component selector")
		}
		scan[i].compIndex = uint8(compIndex)
		for j := range i {
			if scan[i].compIndex == scan[j].compIndex {
				return FormatError("repeated component selector")
			}
		}
		totalHV += d.comp[compIndex].h * d.comp[compIndex].v
		scan[i].td, scan[i].ta = seg[2+2*i]>>4, seg[2+2*i]&0x0f
		if scan[i].td > maxTh || scan[i].ta > maxTh || (d.baseline && (scan[i].td > 1 || scan[i].ta > 1)) {
			return FormatError("bad Td or Ta value")
		}
	}
	if d.nComp > 1 && totalHV > 10 {
		return FormatError("total sampling factors too large")
	}
	zigStart, zigEnd, ah, al := 0, blockSize-1, uint(0), uint(0)
	if d.progressive {
		zigStart, zigEnd = int(seg[1+2*nComp]), int(seg[2+2*nComp])
		ah, al = uint(seg[3+2*nComp]>>4), uint(seg[3+2*nComp]&0x0f)
		if (zigStart == 0 && zigEnd != 0) || zigStart > zigEnd || blockSize <= zigEnd {
			return FormatError("bad spectral selection bounds")
		}
		if zigStart != 0 && nComp != 1 {
			return FormatError("progressive AC coefficients for more than one component")
		}
		if ah != 0 && ah != al+1 {
			return FormatError("bad successive approximation values")
		}
		if al > 13 {
			return FormatError("bad successive approximation values")
		}
		if zigStart != 0 {
			return nil // AC only: nextMarker skips its data
		}
	}
	for i := range nComp {
		d.seen[scan[i].compIndex] = true
	}
	// The bit reader is fresh: every scan leaves it reset.
	if err := d.decodeScan(scan[:nComp], ah, al); err != nil {
		return err
	}
	return d.resetBits()
}

// decodeScan walks a scan's MCUs. Each block's DC coefficient is decoded
// (or refined, ah != 0) into d.dc; a sequential scan's AC coefficients
// are read past.
func (d *decoder) decodeScan(scan []scanComp, ah, al uint) error {
	var (
		pred        [maxComponents]int32 // DC predictions, section F.2.1.3.1
		blockCount  int
		expectedRST = byte(rst0Marker)
	)
	nComp := len(scan)
	for my := range d.myy {
		for mx := range d.mxx {
			for i := range nComp {
				ci := scan[i].compIndex
				hi, vi := d.comp[ci].h, d.comp[ci].v
				across := d.mxx * hi
				for j := range hi * vi {
					// Interleaved scans walk each MCU's blocks; a scan of one
					// component walks its blocks left to right, top to bottom,
					// and has none for blocks wholly outside the image
					// (the comment in image/jpeg's scan.go has the picture).
					var bx, by int
					if nComp != 1 {
						bx, by = hi*mx+j%hi, vi*my+j/hi
					} else {
						bx, by = blockCount%across, blockCount/across
						blockCount++
						if bx*8 >= d.width || by*8 >= d.height {
							continue
						}
					}
					dc := &d.dc[ci][by*across+bx]
					if ah != 0 {
						if d.decodeBits(1) != 0 {
							*dc |= 1 << al
						}
						continue
					}
					t, err := d.decodeHuffman(&d.huff[dcTable][scan[i].td])
					if err != nil {
						return err
					}
					if t > 16 {
						return ErrUnsupported // "excessive DC component" in image/jpeg
					}
					pred[ci] += d.receiveExtend(t)
					*dc = pred[ci] << al
					if !d.progressive {
						if err := d.skipAC(&d.huff[acTable][scan[i].ta]); err != nil {
							return err
						}
					}
				}
			}
			if d.ri > 0 && (my*d.mxx+mx+1)%d.ri == 0 && my*d.mxx+mx+1 < d.mxx*d.myy {
				if err := d.restart(expectedRST); err != nil {
					return err
				}
				expectedRST++
				if expectedRST > rst7Marker {
					expectedRST = rst0Marker
				}
				pred = [maxComponents]int32{}
			}
		}
	}
	return nil
}

// skipAC reads past a sequential block's 63 AC coefficients (section
// F.2.2.2): each code's run and size say how far to move and how many
// bits to drop; nothing is stored.
func (d *decoder) skipAC(h *huffman) error {
	for zig := 1; zig < blockSize; {
		v, err := d.decodeHuffman(h)
		if err != nil {
			return err
		}
		run, size := v>>4, v&0x0f
		if size == 0 {
			if run != 0x0f {
				return nil // end of block
			}
			zig += 16
			continue
		}
		zig += int(run) + 1
		d.skipBits(uint(size))
	}
	return nil
}

// restart moves past the restart marker ending an interval (section
// F.1.2.3), resynchronising like image/jpeg's findRST when the data before
// it is corrupt: any other marker there is an error.
func (d *decoder) restart(expected byte) error {
	if err := d.resetBits(); err != nil {
		return err
	}
	for {
		if d.pos+1 >= len(d.src) {
			return FormatError("short Huffman data")
		}
		if d.src[d.pos] != 0xff {
			d.pos++
			continue
		}
		switch m := d.src[d.pos+1]; {
		case m == expected:
			d.pos += 2
			return nil
		case m == 0x00:
			d.pos += 2
		case m == 0xff:
			d.pos++
		default:
			return FormatError("bad RST marker")
		}
	}
}
